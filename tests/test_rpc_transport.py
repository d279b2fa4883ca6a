"""The RPC layer on real Pyro5 daemons: the secret handshake, kernel-given identity, socket files.

The identity tests run clients as two real Unix accounts (created when missing, so they need root)
and check that the server sees each account's uid whatever the client claims.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import Pyro5.api
import Pyro5.errors
import pytest
from unix_users import ADMINS, ALICE, BOB, Accounts, as_account, ensure_test_users

from cobaltlite.errors import InputError
from cobaltlite.rpc import transport
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.errors import SecurityError
from cobaltlite.rpc.secret import create_secret, read_secret
from cobaltlite.rpc.transport import (
    USER_SOCKET_MODE,
    caller_credentials,
    caller_is_admin,
    serve,
    serve_in_thread,
    shutdown,
    uid_is_admin,
)


@Pyro5.api.expose
class Probe:
    """A stand-in component: reports what the server knows about its caller."""

    def echo(self, value: object) -> object:
        return value

    def whoami(self, claimed_user: str | None = None, claimed_uid: int | None = None) -> dict:
        # The claims are deliberately ignored: identity comes only from the kernel.
        pid, uid, gid = caller_credentials()
        return {"pid": pid, "uid": uid, "gid": gid, "admin": caller_is_admin(ADMINS)}

    def fail(self, kind: str) -> None:
        errors: dict[str, Exception] = {
            "value": ValueError("walltime must be positive"),
            "lookup": LookupError("no job 42"),
            "security": SecurityError("only admins may stop a queue"),
            "input": InputError("queue file q.yaml line 3: bad limit"),
        }
        raise errors[kind]


def new_secret() -> str:
    return secrets.token_hex(32)


@pytest.fixture
def served() -> Iterator[list]:
    """Start daemons through `served.append(serve(...))`; every one is shut down afterwards."""
    daemons: list = []
    yield daemons
    for daemon, _uri in daemons:
        shutdown(daemon)


def start(served: list, **kwargs: object) -> Pyro5.api.URI:
    daemon, uri = serve(Probe(), object_id="probe", **kwargs)
    served.append((daemon, uri))
    serve_in_thread(daemon)
    return uri


# ---------------------------------------------------------------------- the secret handshake


@pytest.mark.parametrize("where", ["unix", "tcp"])
def test_a_call_with_the_right_secret_works(served: list, tmp_path: Path, where: str) -> None:
    secret = new_secret()
    placement = {"unix_socket": tmp_path / "c.sock"} if where == "unix" else {}
    uri = start(served, secret=secret, **placement)
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo({"jobs": [1, 2], "queue": "default"}) == {
            "jobs": [1, 2],
            "queue": "default",
        }


@pytest.mark.parametrize("where", ["unix", "tcp"])
@pytest.mark.parametrize("offered", [None, "wrong"])
def test_a_missing_or_wrong_secret_is_refused_and_the_daemon_keeps_serving(
    served: list, tmp_path: Path, where: str, offered: str | None
) -> None:
    secret = new_secret()
    placement = {"unix_socket": tmp_path / "c.sock"} if where == "unix" else {}
    uri = start(served, secret=secret, **placement)
    wrong = None if offered is None else new_secret()
    with (
        connect(uri, secret=wrong) as intruder,
        pytest.raises(Pyro5.errors.CommunicationError, match="component secret refused"),
    ):
        intruder.echo(1)
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo("still serving") == "still serving"


def test_a_silent_client_is_dropped_after_the_handshake_timeout(
    served: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "HANDSHAKE_TIMEOUT", 0.2)
    path = tmp_path / "c.sock"
    start(served, unix_socket=path, secret=new_secret())
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.settimeout(3)
        silent.connect(str(path))
        started = time.monotonic()
        while silent.recv(4096):  # the daemon's refusal, then end of stream when it hangs up
            pass
        assert time.monotonic() - started < 2


def test_an_idle_connection_is_closed_after_idle_timeout(served: list, tmp_path: Path) -> None:
    secret = new_secret()
    uri = start(served, unix_socket=tmp_path / "c.sock", secret=secret, idle_timeout=0.2)
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo(1) == 1
        time.sleep(0.5)
        with pytest.raises(Pyro5.errors.ConnectionClosedError):
            proxy.echo(2)
        assert proxy.echo(3) == 3  # the proxy reconnects on the next call


# ---------------------------------------------------------------------- what serve() refuses


def test_serve_refuses_a_daemon_without_secret_unless_it_reads_peer_credentials(
    tmp_path: Path,
) -> None:
    with pytest.raises(ValueError, match="needs a secret"):
        serve(Probe(), object_id="p", secret=None)
    with pytest.raises(ValueError, match="needs a secret"):
        serve(Probe(), object_id="p", unix_socket=tmp_path / "c.sock", secret=None)
    with pytest.raises(ValueError, match="Unix socket"):
        serve(Probe(), object_id="p", secret=new_secret(), peer_credentials=True)
    with pytest.raises(ValueError, match="at least 32"):
        serve(Probe(), object_id="p", secret="short")


def test_serve_refuses_a_non_loopback_address() -> None:
    with pytest.raises(ValueError, match="in clear"):
        serve(Probe(), object_id="p", host="0.0.0.0", secret=new_secret())


# ---------------------------------------------------------------------- socket files


def test_socket_files_get_the_requested_mode(served: list, tmp_path: Path) -> None:
    start(served, unix_socket=tmp_path / "component.sock", secret=new_secret())
    start(
        served,
        unix_socket=tmp_path / "user.sock",
        socket_mode=USER_SOCKET_MODE,
        secret=None,
        peer_credentials=True,
    )
    assert stat.S_IMODE((tmp_path / "component.sock").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "user.sock").stat().st_mode) == 0o666


def test_a_stale_socket_is_replaced_but_a_live_one_is_not(served: list, tmp_path: Path) -> None:
    path = tmp_path / "c.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # bound, never listening, then closed: what a killed daemon leaves
    dead.close()
    secret = new_secret()
    uri = start(served, unix_socket=path, secret=secret)
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo(7) == 7
    with pytest.raises(InputError, match="already serving"):
        serve(Probe(), object_id="p", unix_socket=path, secret=secret)
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo(8) == 8


def test_a_regular_file_in_the_socket_path_is_not_removed(tmp_path: Path) -> None:
    path = tmp_path / "c.sock"
    path.write_text("not a socket")
    with pytest.raises(InputError, match="not a socket"):
        serve(Probe(), object_id="p", unix_socket=path, secret=new_secret())
    assert path.read_text() == "not a socket"


def test_shutdown_removes_the_socket_file_and_may_be_repeated(tmp_path: Path) -> None:
    path = tmp_path / "c.sock"
    daemon, _ = serve(Probe(), object_id="p", unix_socket=path, secret=new_secret())
    thread = serve_in_thread(daemon)
    shutdown(daemon)
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert not path.exists()
    shutdown(daemon)


# ---------------------------------------------------------------------- identity and errors


def test_caller_credentials_are_those_of_the_calling_process(served: list, tmp_path: Path) -> None:
    uri = start(served, unix_socket=tmp_path / "u.sock", secret=None, peer_credentials=True)
    with connect(uri) as proxy:
        seen = proxy.whoami(claimed_user="someone-else", claimed_uid=12345)
    assert (seen["pid"], seen["uid"], seen["gid"]) == (os.getpid(), os.geteuid(), os.getegid())


def test_caller_credentials_are_refused_over_tcp(served: list) -> None:
    secret = new_secret()
    uri = start(served, secret=secret)
    with (
        connect(uri, secret=secret) as proxy,
        pytest.raises(PermissionError, match="only known for calls over a Unix socket"),
    ):
        proxy.whoami()


def test_caller_credentials_outside_a_remote_call_is_an_error() -> None:
    with pytest.raises(SecurityError, match="outside a remote call"):
        caller_credentials()


@pytest.mark.parametrize(
    ("kind", "expected", "message"),
    [
        ("value", ValueError, "walltime must be positive"),
        ("lookup", LookupError, "no job 42"),
        ("security", PermissionError, "only admins may stop a queue"),
        ("input", RuntimeError, "queue file q.yaml line 3: bad limit"),
    ],
)
def test_server_errors_reach_the_client_as_builtins_with_their_message(
    served: list, kind: str, expected: type[Exception], message: str
) -> None:
    secret = new_secret()
    uri = start(served, secret=secret)
    with connect(uri, secret=secret) as proxy, pytest.raises(expected) as raised:
        proxy.fail(kind)
    assert type(raised.value) is expected
    assert str(raised.value) == message


# ---------------------------------------------------------------------- real Unix users


@pytest.fixture(scope="session")
def users() -> Accounts:
    return ensure_test_users()


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory every account can enter (pytest's tmp_path sits under a 0700 directory).

    Tests request it before `served`, so the daemons stop before their socket files are removed.
    """
    path = Path(tempfile.mkdtemp(prefix="cltest-rpc-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


CLIENT = """
import json, sys
from cobaltlite.rpc.client import connect
try:
    with connect(sys.argv[1], timeout=5) as proxy:
        # Claims a client might make; the server must not believe them.
        print(json.dumps(proxy.whoami(claimed_user="root", claimed_uid=0)))
except Exception as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc)}))
"""


def run_client_as(users: Accounts, account: str, uri: Pyro5.api.URI) -> dict:
    ran = subprocess.run(
        [users.python, "-c", CLIENT, str(uri)],
        **as_account(account),
        env=users.env,
        cwd="/",
        capture_output=True,
        text=True,
        timeout=15,
        check=True,
    )
    return json.loads(ran.stdout)


def test_the_server_sees_each_real_users_uid_and_admin_status(
    users: Accounts, public_dir: Path, served: list
) -> None:
    uri = start(
        served,
        unix_socket=public_dir / "user.sock",
        socket_mode=USER_SOCKET_MODE,
        secret=None,
        peer_credentials=True,
    )
    for account, admin in ((ALICE, False), (BOB, True)):
        entry = pwd.getpwnam(account)
        seen = run_client_as(users, account, uri)
        assert seen["uid"] == entry.pw_uid != 0
        assert seen["gid"] == entry.pw_gid
        assert seen["pid"] != os.getpid()
        assert seen["admin"] is admin
    with connect(uri) as proxy:
        as_root = proxy.whoami()
    assert as_root["uid"] == 0
    assert as_root["admin"] is True


def test_a_user_cannot_reach_a_component_socket(
    users: Accounts, public_dir: Path, served: list
) -> None:
    uri = start(served, unix_socket=public_dir / "component.sock", secret=new_secret())
    outcome = run_client_as(users, ALICE, uri)
    assert outcome["error"] == "CommunicationError"
    assert "Permission denied" in outcome["message"]


def test_admin_membership_by_primary_or_supplementary_group(users: Accounts) -> None:
    alice = pwd.getpwnam(ALICE)
    bob = pwd.getpwnam(BOB)
    assert uid_is_admin(0, None)
    assert not uid_is_admin(alice.pw_uid, None)
    assert not uid_is_admin(alice.pw_uid, ADMINS)
    assert uid_is_admin(bob.pw_uid, ADMINS)  # supplementary member
    assert uid_is_admin(alice.pw_uid, grp.getgrgid(alice.pw_gid).gr_name)  # primary group
    with pytest.raises(LookupError, match="cltest-no-such-group"):
        uid_is_admin(alice.pw_uid, "cltest-no-such-group")


# ---------------------------------------------------------------------- the secret file


def test_create_secret_writes_an_owner_only_file_in_an_owner_only_directory(
    tmp_path: Path,
) -> None:
    path = tmp_path / "etc" / "cobaltlite" / "secret"
    token = create_secret(path)
    assert len(token) == 64
    int(token, 16)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert read_secret(path) == token
    assert [p.name for p in path.parent.iterdir()] == ["secret"]  # no temporary file left


def test_create_secret_overwrites_only_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    first = create_secret(path)
    with pytest.raises(InputError, match="already exists"):
        create_secret(path)
    assert read_secret(path) == first
    second = create_secret(path, overwrite=True)
    assert second != first
    assert read_secret(path) == second


def test_a_secret_readable_by_others_is_refused_with_path_and_mode(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    create_secret(path)
    path.chmod(0o644)
    with pytest.raises(SecurityError) as refused:
        read_secret(path)
    assert str(path) in str(refused.value)
    assert "mode 0644" in str(refused.value)


def test_a_secret_owned_by_another_user_is_refused(users: Accounts, tmp_path: Path) -> None:
    path = tmp_path / "secret"
    create_secret(path)
    os.chown(path, pwd.getpwnam(ALICE).pw_uid, -1)
    with pytest.raises(SecurityError, match=f"{path} is owned by uid"):
        read_secret(path)


def test_a_secret_behind_a_symlink_or_too_short_is_refused(tmp_path: Path) -> None:
    real = tmp_path / "real"
    create_secret(real)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(SecurityError, match="cannot open secret file"):
        read_secret(tmp_path / "link")
    short = tmp_path / "short"
    short.write_text("abc\n")
    short.chmod(0o600)
    with pytest.raises(SecurityError, match="holds 3 characters"):
        read_secret(short)
    with pytest.raises(InputError, match="does not exist"):
        read_secret(tmp_path / "missing")
