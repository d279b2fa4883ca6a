"""Hardening of the RPC layer (issue 8): requests are decoded as plain data only, and errors a
daemon did not mean for users reach them as a short RuntimeError, details in the daemon log."""

from __future__ import annotations

import socket
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import Pyro5.api
import Pyro5.errors
import pytest

from cobaltlite.rpc.client import connect
from cobaltlite.rpc.transport import USER_SOCKET_MODE, serve, serve_in_thread, shutdown

SECRET = "s" * 64


@Pyro5.api.expose
class Target:
    def echo(self, value: object) -> object:
        # Touching an argument is what would make a revived proxy connect.
        if isinstance(value, dict):
            for key in value:
                value.get(key)
        return repr(value)[:200] if not isinstance(value, (str, int, list, dict)) else value

    def same(self, value: object) -> object:
        return value

    def kw(self, **kwargs: object) -> object:
        return sorted(kwargs)


@pytest.fixture(scope="module")
def daemons() -> Iterator[dict[str, tuple[Pyro5.api.URI, str | None]]]:
    directory = Path(tempfile.mkdtemp(prefix="cltest-hard-", dir="/tmp"))
    user, user_uri = serve(Target(), unix_socket=directory / "user.sock",
                           socket_mode=USER_SOCKET_MODE, object_id="t", secret=None,
                           peer_credentials=True, idle_timeout=10.0)
    comp, comp_uri = serve(Target(), unix_socket=directory / "comp.sock", object_id="t",
                           secret=SECRET)
    for daemon in (user, comp):
        serve_in_thread(daemon)
    yield {"user": (user_uri, None), "component": (comp_uri, SECRET)}
    shutdown(user)
    shutdown(comp)


class Listener:
    """A Unix socket the test controls; counts the connections made to it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    directory = Path(tempfile.mkdtemp(prefix="cltest-lsn-", dir="/tmp"))
    spy = Listener(directory / "spy.sock")
    yield spy
    spy.close()


def proxy_dict(path: Path) -> dict:
    # What Pyro5's JSON serializer makes of a Proxy: reviving it builds a proxy to `path`.
    return {"__class__": "Pyro5.client.Proxy",
            "state": [f"PYRO:obj@./u:{path}", [], ["echo", "get", "keys", "items"], [],
                      0.5, None, None, 0]}


@pytest.mark.parametrize("side", ["user", "component"])
@pytest.mark.parametrize("where", ["positional", "nested", "keyword"])
def test_a_class_shaped_argument_is_refused_and_opens_no_connection(
        daemons: dict, listener: Listener, side: str, where: str) -> None:
    uri, secret = daemons[side]
    evil = proxy_dict(listener.path)
    with connect(uri, secret=secret) as proxy:
        with pytest.raises(ValueError, match="request arguments must be plain data"):
            if where == "positional":
                proxy.echo(evil)
            elif where == "nested":
                proxy.echo({"filters": [{"user": evil}]})
            else:
                proxy.kw(filters=evil)
        # The same connection, and the daemon, keep serving.
        assert proxy.echo({"plain": [1, "two"]}) == {"plain": [1, "two"]}
    with connect(uri, secret=secret) as proxy:
        assert proxy.echo("again") == "again"
    assert listener.accepted == 0


@pytest.mark.parametrize("side", ["user", "component"])
def test_class_shaped_handshake_data_is_refused_and_opens_no_connection(
        daemons: dict, listener: Listener, side: str) -> None:
    uri, _secret = daemons[side]
    proxy = Pyro5.api.Proxy(uri)
    proxy._pyroSerializer = "json"
    proxy._pyroHandshake = proxy_dict(listener.path)
    with proxy, pytest.raises(Pyro5.errors.CommunicationError,
                              match="request arguments must be plain data"):
        proxy._pyroBind()
    assert listener.accepted == 0
    with connect(uri, secret=daemons[side][1]) as fine:
        assert fine.echo(1) == 1


# ---------------------------------------------------------------------- internal errors


class DiskFull(Exception):
    """Not a builtin: Pyro5 clients cannot rebuild it."""


@Pyro5.api.expose
class Faulty:
    def sqlalchemy(self) -> None:
        import sqlalchemy.exc

        raise sqlalchemy.exc.OperationalError(
            "INSERT INTO jobs (owner, secret_column) VALUES (?, ?)", ("alice", "hunter2"),
            OSError(28, "database or disk is full"))

    def custom(self) -> None:
        raise DiskFull("/var/lib/cobaltlite/state.db: no space left")

    def unpicklable(self) -> None:
        raise DiskFull(object())  # its args cannot even be serialized

    def bug(self) -> None:
        return None.missing  # type: ignore[attr-defined]

    def refusal(self) -> None:
        raise ValueError("walltime must be positive")

    def fine(self, value: int = 0) -> int:
        return value + 1


@pytest.fixture
def daemon_log(tmp_path: Path) -> Iterator[Path]:
    import structlog

    from cobaltlite import logs

    log_file = tmp_path / "daemon.log"
    logs.configure("test", log_file)
    yield log_file
    structlog.reset_defaults()


@pytest.mark.parametrize("method", ["sqlalchemy", "custom", "unpicklable", "bug"])
@pytest.mark.parametrize("side", ["user", "component"])
def test_an_unexpected_error_reaches_the_client_as_a_short_runtime_error_and_is_logged(
        tmp_path: Path, daemon_log: Path, method: str, side: str) -> None:
    import json
    import re

    secret = None if side == "user" else SECRET
    daemon, uri = serve(Faulty(), unix_socket=tmp_path / "f.sock", object_id="faulty",
                        secret=secret, peer_credentials=side == "user",
                        service="the queue manager")
    serve_in_thread(daemon)
    try:
        with connect(uri, secret=secret) as proxy:
            with pytest.raises(RuntimeError) as raised:
                getattr(proxy, method)()
            assert type(raised.value) is RuntimeError
            message = str(raised.value)
            match = re.fullmatch(r"internal error in the queue manager; the administrator can "
                                 r"find details in its log \(ref ([0-9a-f]{8})\)", message)
            assert match, message
            assert getattr(raised.value, "_pyroTraceback", None) in (None, [], "")
            # Expected refusals keep their message; the daemon keeps serving.
            with pytest.raises(ValueError, match="walltime must be positive"):
                proxy.refusal()
            assert proxy.fine(1) == 2
    finally:
        shutdown(daemon)
    entries = [json.loads(line) for line in daemon_log.read_text().splitlines()]
    (entry,) = [e for e in entries if e.get("event") == "rpc.internal_error"]
    assert entry["ref"] == match.group(1)
    assert entry["method"] == method
    assert "Traceback (most recent call last)" in entry["exception"]
    assert f"in {method}" in entry["exception"]


def test_wrong_arguments_and_unknown_methods_keep_their_message(tmp_path: Path) -> None:
    daemon, uri = serve(Faulty(), unix_socket=tmp_path / "f.sock", object_id="faulty",
                        secret=SECRET)
    serve_in_thread(daemon)
    try:
        with connect(uri, secret=SECRET) as proxy:
            with pytest.raises(TypeError, match="positional argument"):
                proxy.fine(1, 2, 3)
            with pytest.raises(AttributeError):
                proxy._pyroInvoke("nosuch", (), {})
            assert proxy.fine() == 1
    finally:
        shutdown(daemon)


# ---------------------------------------------------------------------- generated requests

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# Lone surrogates included: the client below escapes them, as any hand-made client could.
_text = st.text(st.characters(codec=None), max_size=40) | st.sampled_from(
    ["\ud800", "a\udfffb", "\x00", "\u202e", "\U0010ffff", "x" * 20_000])
_keys = _text | st.sampled_from(["__class__", "__exception__", "state", "args"])
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | _text,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_keys, inner, max_size=6)
    | st.fixed_dictionaries({"__class__": st.sampled_from(
        ["Pyro5.client.Proxy", "Pyro5.core.URI", "builtins.ValueError", "os.system"]),
        "state": inner, "__exception__": st.booleans()}),
    max_leaves=40)


def _escaping_dumps_call(self: object, obj: str, method: str, vargs: object,
                         kwargs: object) -> bytes:
    import json

    call = {"object": obj, "method": method, "params": vargs, "kwargs": kwargs}
    return json.dumps(call, ensure_ascii=True).encode()


def _has_class_dict(value: object) -> bool:
    if isinstance(value, dict):
        return "__class__" in value or any(_has_class_dict(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_class_dict(v) for v in value)
    return False


def _has_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= c <= "\udfff" for c in value)
    if isinstance(value, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_surrogate(v) for v in value)
    return False


@pytest.mark.parametrize("side", ["user", "component"])
@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=_json)
def test_generated_arguments_get_a_result_or_a_clear_refusal(
        daemons: dict, listener: Listener, monkeypatch: pytest.MonkeyPatch, side: str,
        value: object) -> None:
    from Pyro5 import serializers

    codec = serializers.serializers["json"]
    monkeypatch.setattr(type(codec), "dumpsCall", _escaping_dumps_call)
    uri, secret = daemons[side]
    with connect(uri, secret=secret) as proxy:
        try:
            result = proxy.same(value)
        except ValueError as refused:
            assert _has_class_dict(value) or _has_surrogate(value), refused
            assert ("plain data" in str(refused)) or ("no lone surrogates" in str(refused))
        else:
            assert not _has_class_dict(value)
            assert result == value
        assert proxy.echo([1]) == [1]
    assert listener.accepted == 0


def test_a_deeply_nested_request_is_refused_and_the_daemon_keeps_serving(
        daemons: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    from Pyro5 import serializers

    def nested_call(self: object, obj: str, method: str, vargs: object, kwargs: object) -> bytes:
        depth = 200_000
        return (b'{"object": "%s", "method": "same", "params": [' % obj.encode()
                + b"[" * depth + b"]" * depth + b'], "kwargs": {}}')

    uri, secret = daemons["user"]
    with connect(uri, secret=secret) as proxy:
        monkeypatch.setattr(type(serializers.serializers["json"]), "dumpsCall", nested_call)
        with pytest.raises(ValueError, match="nested too deeply"):
            proxy.same(None)
        monkeypatch.undo()
        assert proxy.same([1]) == [1]


def test_batched_calls_are_refused(daemons: dict) -> None:
    uri, secret = daemons["component"]
    with connect(uri, secret=secret) as proxy:
        batch = Pyro5.api.BatchProxy(proxy)
        batch.same(1)
        with pytest.raises(Pyro5.errors.SerializeError, match="does not accept batched calls"):
            list(batch())
        assert proxy.same(2) == 2
