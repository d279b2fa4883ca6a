"""A client sends the component secret only to a server run by the secret's owner or by root.

Real sockets and real processes: the impostors are programs run as other Unix accounts (the test
accounts of unix_users.py) that listen where a component should be and record every byte they
receive. A refused client must not have sent them a single byte of its handshake. The live test
puts an impostor on the queue manager's TCP port while it is down (after kill -9), then restarts
the queue manager and sees the system report the end of a job that ended meanwhile.
"""

from __future__ import annotations

import contextlib
import copy
import ctypes
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import Pyro5.api
import Pyro5.errors
import pytest
from live import Instance
from unix_users import ALICE, BOB, Accounts, as_account, ensure_test_users

from cobaltlite.config import load_config
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.errors import SecurityError
from cobaltlite.rpc.peers import Peer
from cobaltlite.rpc.secret import create_secret
from cobaltlite.rpc.transport import serve, serve_in_thread, shutdown
from cobaltlite.system import procfs

# Listens (unix PATH | tcp HOST PORT | dual PORT, the last on [::] taking IPv4 too), prints its
# port, and until its stdin closes accepts every connection and keeps every byte; then prints
# how many connections came and what they sent.
IMPOSTOR = r"""
import json, select, socket, sys
kind = sys.argv[1]
if kind == "unix":
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(sys.argv[2])
elif kind == "dual":
    listener = socket.socket(socket.AF_INET6)
    listener.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("::", int(sys.argv[2])))
else:
    host, port = sys.argv[2], int(sys.argv[3])
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
listener.listen(64)
print(0 if kind == "unix" else listener.getsockname()[1], flush=True)
conns, count, received = [], 0, b""

def take(sock):
    global count, received
    if sock is listener:
        conns.append(listener.accept()[0])
        count += 1
        return True
    data = sock.recv(65536)
    received += data
    if not data:
        conns.remove(sock)
        sock.close()
    return bool(data)

while True:
    ready = select.select([sys.stdin, listener, *conns], [], [])[0]
    if sys.stdin in ready:
        break
    for sock in ready:
        take(sock)
# Whatever is still queued counts too.
while any(take(s) for s in select.select([listener, *conns], [], [], 0.2)[0]):
    pass
print(json.dumps({"connections": count, "received": received.hex()}), flush=True)
"""

# Real cobaltlite daemons in a process of their own, run as some account: a component on loopback
# TCP (port argv[2], 0: any) holding the secret of file argv[1], and with argv[3] a user daemon
# (no secret) on that Unix socket. Prints their URIs, then serves until killed.
DAEMONS = r"""
import sys, Pyro5.api
from cobaltlite.rpc.secret import read_secret
from cobaltlite.rpc.transport import USER_SOCKET_MODE, serve, serve_in_thread

@Pyro5.api.expose
class Echo:
    def echo(self, value):
        return value

daemons = [serve(Echo(), port=int(sys.argv[2]), object_id="echo",
                 secret=read_secret(sys.argv[1]))]
if len(sys.argv) > 3:
    daemons.append(serve(Echo(), unix_socket=sys.argv[3], socket_mode=USER_SOCKET_MODE,
                         object_id="echo", secret=None, peer_credentials=True))
for daemon, _uri in daemons:
    serve_in_thread(daemon)
print(*(uri for _daemon, uri in daemons), flush=True)
sys.stdin.read()
"""


@Pyro5.api.expose
class Echo:
    def echo(self, value: object) -> object:
        return value


class Impostor:
    """An IMPOSTOR process run as `account`; `report()` stops it and says what it got."""

    def __init__(self, accounts: Accounts, account: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [accounts.python, "-c", IMPOSTOR, *args], env=accounts.env, cwd="/",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **as_account(account))
        assert self.process.stdout is not None
        self.port = int(self.process.stdout.readline())

    def report(self) -> dict:
        out, _ = self.process.communicate(timeout=10)
        found = json.loads(out)
        return {"connections": found["connections"],
                "received": bytes.fromhex(found["received"])}


@contextlib.contextmanager
def impostor(accounts: Accounts, account: str, *args: str) -> Iterator[Impostor]:
    running = Impostor(accounts, account, *args)
    try:
        yield running
    finally:
        stop(running.process)


@contextlib.contextmanager
def daemons(python: str, env: dict[str, str], *args: str, **user: object
            ) -> Iterator[list[str]]:
    """DAEMONS run by `python` with `args`, as the account `user` gives (as_account); yields
    their URIs."""
    process = subprocess.Popen([python, "-c", DAEMONS, *args], env=env, cwd="/",
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **user)
    try:
        assert process.stdout is not None
        uris = process.stdout.readline().split()
        assert uris, f"the daemons did not start (exit status {process.wait(10)})"
        yield uris
    finally:
        stop(process)


def stop(process: subprocess.Popen[str]) -> None:
    """SIGKILL, as a crash would: that process only, then reap it."""
    if process.poll() is None:
        process.kill()
    process.communicate()


def has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def tcp_location(host: str, port: int) -> str:
    return f"tcp:[{host}]:{port}" if ":" in host else f"tcp:{host}:{port}"


def refusal(location: str, uid_name: str, owner: int, owner_is: str) -> str:
    entry = pwd.getpwnam(uid_name)
    owner_name = pwd.getpwuid(owner).pw_name
    wanted = f"uid {owner} ({owner_name}), {owner_is}" + (", or as root" if owner else "")
    return (f"refusing to send the component secret to {location}: the process listening "
            f"there runs as uid {entry.pw_uid} ({uid_name}), not as {wanted}")


@pytest.fixture(scope="module")
def accounts() -> Accounts:
    return ensure_test_users()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A fresh directory every account can traverse (pytest's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="cltest-ident-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def secret_file(tmp_path: Path) -> tuple[str, Path]:
    """A root-owned secret: the case of daemons run by root."""
    path = tmp_path / "secret"
    return create_secret(path), path


PLACES = ["unix", "tcp:127.0.0.1", pytest.param("tcp:::1", marks=pytest.mark.skipif(
    not has_ipv6_loopback(), reason="this host has no IPv6 loopback"))]


# ---- impostors get nothing ---------------------------------------------------------------------


@pytest.mark.parametrize("place", PLACES)
def test_an_impostor_gets_no_byte_and_the_refusal_says_where_and_who(
    accounts: Accounts, open_tmp: Path, secret_file: tuple[str, Path], place: str
) -> None:
    secret, path = secret_file
    bobs = open_tmp / "bob"  # a directory where bob may bind a socket
    bobs.mkdir()
    os.chown(bobs, pwd.getpwnam(BOB).pw_uid, -1)
    host = place.removeprefix("tcp:")
    args = ("unix", str(bobs / "qm.sock")) if place == "unix" else ("tcp", host, "0")
    with impostor(accounts, BOB, *args) as bob:
        if place == "unix":
            uri, location = f"PYRO:queue-manager@./u:{bobs / 'qm.sock'}", f"unix:{bobs}/qm.sock"
        else:
            location = tcp_location(host, bob.port)
            uri = f"PYRO:queue-manager@{location.removeprefix('tcp:')}"
        expected = refusal(location, BOB, 0, f"the owner of {path}")
        with connect(uri, secret=secret, secret_path=path, timeout=5) as proxy:
            for _ in range(2):  # every connection is checked, the next one too
                with pytest.raises(SecurityError) as refused:
                    proxy.ping()
                assert str(refused.value) == expected
        got = bob.report()
    assert got["connections"] == 2, got
    assert got["received"] == b"", f"the impostor received {got['received']!r}"


def test_an_ipv4_client_reaching_a_dual_stack_impostor_is_refused(
    accounts: Accounts, secret_file: tuple[str, Path]
) -> None:
    """Accepted by an IPv6 socket on [::], the connection is in /proc/net/tcp6 under
    IPv4-mapped addresses; it must still be found, and bob named."""
    if not has_ipv6_loopback():
        pytest.skip("this host has no IPv6")
    secret, path = secret_file
    with impostor(accounts, BOB, "dual", "0") as bob:
        location = f"tcp:127.0.0.1:{bob.port}"
        with connect(f"PYRO:system@127.0.0.1:{bob.port}", secret=secret, secret_path=path,
                     timeout=5) as proxy, pytest.raises(SecurityError) as refused:
            proxy.ping()
        got = bob.report()
    assert str(refused.value) == refusal(location, BOB, 0, f"the owner of {path}")
    assert got == {"connections": 1, "received": b""}


def test_a_secret_given_without_its_file_counts_as_this_accounts_own(
    accounts: Accounts, secret_file: tuple[str, Path]
) -> None:
    secret, _path = secret_file
    with impostor(accounts, BOB, "tcp", "127.0.0.1", "0") as bob:
        with connect(f"PYRO:system@127.0.0.1:{bob.port}", secret=secret, timeout=5) as proxy, \
                pytest.raises(SecurityError) as refused:
            proxy.ping()
        got = bob.report()
    assert str(refused.value) == refusal(f"tcp:127.0.0.1:{bob.port}", BOB, os.geteuid(),
                                         "the account of this process")
    assert got == {"connections": 1, "received": b""}


def test_a_copy_of_a_proxy_checks_too(
    accounts: Accounts, secret_file: tuple[str, Path]
) -> None:
    """copy.copy is Pyro5's way to hand a proxy to another thread; the copy keeps the rule."""
    secret, path = secret_file
    with impostor(accounts, BOB, "tcp", "127.0.0.1", "0") as bob:
        original = connect(f"PYRO:system@127.0.0.1:{bob.port}", secret=secret,
                           secret_path=path, timeout=5)
        with copy.copy(original) as duplicate, pytest.raises(SecurityError) as refused:
            duplicate.ping()
        got = bob.report()
    assert str(refused.value) == refusal(f"tcp:127.0.0.1:{bob.port}", BOB, 0,
                                         f"the owner of {path}")
    assert got == {"connections": 1, "received": b""}


def test_a_secret_is_never_sent_through_a_name_server(secret_file: tuple[str, Path]) -> None:
    secret, path = secret_file
    with pytest.raises(ValueError, match="only sent to a PYRO: address"):
        connect("PYRONAME:queue-manager", secret=secret, secret_path=path)


# ---- the right accounts are served -------------------------------------------------------------


@pytest.mark.parametrize("place", PLACES)
def test_a_component_run_by_the_secrets_owner_is_served(
    tmp_path: Path, secret_file: tuple[str, Path], place: str
) -> None:
    secret, path = secret_file
    if place == "unix":
        daemon, uri = serve(Echo(), unix_socket=tmp_path / "c.sock", object_id="echo",
                            secret=secret)
    else:
        daemon, uri = serve(Echo(), host=place.removeprefix("tcp:"), object_id="echo",
                            secret=secret)
    serve_in_thread(daemon)
    try:
        with connect(uri, secret=secret, secret_path=path, timeout=5) as proxy:
            assert proxy.echo({"jobs": [1, 2]}) == {"jobs": [1, 2]}
        with connect(uri, secret=secret, timeout=5) as own:  # the secret as this account's own
            assert own.echo("ok") == "ok"
    finally:
        shutdown(daemon)


def test_a_service_accounts_secret_goes_to_that_account_and_root_only(
    accounts: Accounts, open_tmp: Path
) -> None:
    """Daemons run by bob with bob's secret: bob's daemon and root's are served, alice's
    impostor is refused; a user daemon (no secret) is reached whoever runs it."""
    path = open_tmp / "secret"
    secret = create_secret(path)
    bob = pwd.getpwnam(BOB)
    os.chown(path, bob.pw_uid, bob.pw_gid)
    bobs = open_tmp / "bob"
    bobs.mkdir()
    os.chown(bobs, bob.pw_uid, bob.pw_gid)
    roots, roots_uri = serve(Echo(), object_id="echo", secret=secret)
    serve_in_thread(roots)
    try:
        with daemons(accounts.python, accounts.env, str(path), "0", str(bobs / "user.sock"),
                     **as_account(BOB)) as (bobs_uri, user_uri):
            for uri in (bobs_uri, roots_uri):
                with connect(uri, secret=secret, secret_path=path, timeout=5) as proxy:
                    assert proxy.echo("served") == "served"
            with connect(user_uri, timeout=5) as user_command:
                assert user_command.echo("unchecked") == "unchecked"
    finally:
        shutdown(roots)
    with impostor(accounts, ALICE, "tcp", "127.0.0.1", "0") as alice:
        location = f"tcp:127.0.0.1:{alice.port}"
        with connect(f"PYRO:echo@127.0.0.1:{alice.port}", secret=secret, secret_path=path,
                     timeout=5) as proxy, pytest.raises(SecurityError) as refused:
            proxy.echo(1)
        got = alice.report()
    assert str(refused.value) == refusal(location, ALICE, bob.pw_uid, f"the owner of {path}")
    assert got == {"connections": 1, "received": b""}


def test_a_proxy_checks_again_after_its_component_restarts(
    accounts: Accounts, secret_file: tuple[str, Path]
) -> None:
    """One proxy: served; its daemon killed and an impostor on the port (refused, nothing sent);
    the daemon started again on the same port (served again)."""
    secret, path = secret_file
    port = str(free_port("127.0.0.1"))
    with daemons(sys.executable, dict(os.environ), str(path), port) as (uri,):
        proxy = connect(uri, secret=secret, secret_path=path, timeout=5)
        assert proxy.echo(1) == 1
    try:
        with pytest.raises(Pyro5.errors.CommunicationError):
            proxy.echo(2)  # the broken connection is dropped
        with impostor(accounts, BOB, "tcp", "127.0.0.1", port) as bob:
            with pytest.raises(SecurityError, match=f"uid {pwd.getpwnam(BOB).pw_uid} "):
                proxy.echo(3)
            got = bob.report()
        assert got == {"connections": 1, "received": b""}
        with daemons(sys.executable, dict(os.environ), str(path), port):
            assert proxy.echo(4) == 4
    finally:
        proxy._pyroRelease()


# ---- a live instance on loopback TCP -----------------------------------------------------------

PR_SET_CHILD_SUBREAPER = 36


def _set_subreaper(on: bool) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0


def _reap_zombie_children() -> None:
    me = os.getpid()
    for zombie in [p.pid for p in procfs.processes() if p.state == "Z" and p.ppid == me]:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(zombie, 0)


@pytest.fixture
def tcp_instance(accounts: Accounts) -> Iterator[tuple[Instance, dict[str, str]]]:
    """Every component on loopback TCP ([::1] for the system when the host has it). The test
    process becomes a child subreaper, as in test_crash_safety.py, so that the daemons it kills
    and stops are reaped (this container's init does not reap orphans)."""
    if not _set_subreaper(True):
        pytest.skip("cannot become a child subreaper (prctl failed)")
    system = "::1" if has_ipv6_loopback() else "127.0.0.1"
    hosts = {"queue-manager": "127.0.0.1", "system": system, "scheduler": "127.0.0.1",
             "metrics-monitor": "127.0.0.1"}
    # Drawn one after the other: a port just handed out is not handed out again at once.
    addresses = {name: tcp_location(host, free_port(host)) for name, host in hosts.items()}
    running = None
    try:
        running = Instance(settings={"addresses": addresses}).start()
        yield running, addresses
    finally:
        if running is not None:
            running.stop()
        _reap_zombie_children()
        _set_subreaper(False)


def test_a_live_instance_on_tcp_refuses_an_impostor_and_recovers_after_a_restart(
    tcp_instance: tuple[Instance, dict[str, str]], accounts: Accounts
) -> None:
    instance, addresses = tcp_instance
    config = load_config(instance.state_dir)
    script = instance.jobs_dir / "late.sh"
    script.write_text("#!/bin/sh\nsleep 3\necho done late\nexit 7\n")
    script.chmod(0o755)
    quick = instance.jobs_dir / "quick.sh"
    quick.write_text("#!/bin/sh\necho fine\n")
    quick.chmod(0o755)

    done = instance.wait_for(instance.qsub("-n", "1", "-t", "5", str(quick)), {"done"})
    assert done["exit_status"] == 0, done

    late = instance.qsub("-n", "1", "-t", "5", str(script))
    instance.wait_for(late, {"running"})
    pid = int((instance.state_dir / "run" / "queue-manager.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)  # ours to reap: we are the subreaper of `cobaltlite up`'s daemons
    port = int(addresses["queue-manager"].rsplit(":", 1)[1])
    system_log = instance.state_dir / "log" / "system.log"
    expected = refusal(addresses["queue-manager"], BOB, 0, f"the owner of {config.secret_path}")
    with impostor(accounts, BOB, "tcp", "127.0.0.1", str(port)) as bob:
        # The job ends while bob holds the port: the system's end report is refused, and says
        # so in its log, until the queue manager is back.
        deadline = time.monotonic() + 30
        while expected not in system_log.read_text():
            assert time.monotonic() < deadline, system_log.read_text()[-3000:]
            time.sleep(0.5)
        with pytest.raises(SecurityError) as refused:
            Peer(config, "queue-manager", timeout=5).ping()
        assert str(refused.value) == expected
        shown = instance.cobaltlite("status")
        got = bob.report()
    assert got["connections"] >= 2, got
    assert got["received"] == b"", f"the impostor received {got['received']!r}"
    assert "Traceback" not in shown.stdout + shown.stderr
    refusals = [json.loads(line) for line in system_log.read_text().splitlines()
                if expected in line]
    assert refusals[0]["event"] == "end report failed" and refusals[0]["jobid"] == late

    ran = instance.cobaltlite("up")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    ended = instance.wait_for(late, {"done"})
    assert (ended["exit_status"], ended["end_reason"]) == (7, "exited"), ended
    assert (instance.jobs_dir / f"{late}.output").read_text() == "done late\n"
    after = instance.wait_for(instance.qsub("-n", "1", "-t", "5", str(quick)), {"done"})
    assert after["exit_status"] == 0, after
    assert Peer(config, "queue-manager", timeout=5).ping() == "queue-manager"
