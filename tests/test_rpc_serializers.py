"""Daemons decode only JSON: clients that pick marshal, serpent or msgpack, or send Pyro5's
pre-serialized arguments, are refused with a message, and the daemon goes on serving."""

from __future__ import annotations

import importlib.util
import json
import marshal
import secrets
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import Pyro5.api
import Pyro5.errors
import pytest
from live import Instance
from Pyro5 import protocol
from Pyro5.serializers import JsonSerializer, MarshalSerializer
from Pyro5.socketutil import SocketConnection

from cobaltlite.config import load_config
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.peers import component_uri
from cobaltlite.rpc.transport import USER_SOCKET_MODE, serve, serve_in_thread, shutdown

REFUSED = "this daemon accepts only the json serializer"
SECRET = secrets.token_hex(32)
MSGPACK_ID = 4  # Pyro5's wire id for msgpack, sent raw below whether msgpack is installed or not


def needs(serializer: str) -> object:
    installed = serializer != "msgpack" or importlib.util.find_spec("msgpack") is not None
    return pytest.param(serializer, marks=pytest.mark.skipif(
        not installed, reason="msgpack is not installed (the raw-wire test covers its id)"))


OTHER_SERIALIZERS = [needs("marshal"), needs("serpent"), needs("msgpack")]


@Pyro5.api.expose
class Echo:
    def echo(self, value: object) -> object:
        return value


@pytest.fixture(scope="module")
def daemons() -> Iterator[dict[str, tuple[Pyro5.api.URI, str | None]]]:
    """A user daemon (0666 socket, kernel-identified callers) and a component daemon (secret)."""
    directory = Path(tempfile.mkdtemp(prefix="cltest-ser-", dir="/tmp"))
    user, user_uri = serve(Echo(), unix_socket=directory / "user.sock",
                           socket_mode=USER_SOCKET_MODE, object_id="echo", secret=None,
                           peer_credentials=True, idle_timeout=10.0)
    component, component_uri_ = serve(Echo(), unix_socket=directory / "component.sock",
                                      object_id="echo", secret=SECRET)
    for daemon in (user, component):
        serve_in_thread(daemon)
    yield {"user": (user_uri, None), "component": (component_uri_, SECRET)}
    shutdown(user)
    shutdown(component)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.parametrize("kind", ["user", "component"])
@pytest.mark.parametrize("serializer", OTHER_SERIALIZERS)
def test_a_client_with_another_serializer_is_refused_and_json_still_works(
    daemons: dict, kind: str, serializer: str
) -> None:
    uri, secret = daemons[kind]
    with connect(uri, secret=secret, timeout=5) as bystander:  # connected before the refusal
        assert bystander.echo("before") == "before"
        with connect(uri, secret=secret, timeout=5) as proxy:
            proxy._pyroSerializer = serializer
            with pytest.raises(Pyro5.errors.CommunicationError,
                               match=f"rejected: {REFUSED}, not {serializer}"):
                proxy.echo(1)
        assert bystander.echo("after") == "after"
    with connect(uri, secret=secret, timeout=5) as fresh:
        assert fresh.echo({"jobs": [1, 2]}) == {"jobs": [1, 2]}


@pytest.mark.parametrize("kind", ["user", "component"])
@pytest.mark.parametrize("serializer", OTHER_SERIALIZERS)
def test_a_call_in_another_serializer_on_a_json_connection_is_refused(
    daemons: dict, kind: str, serializer: str
) -> None:
    # The serializer is named per message, so a client may switch after a JSON handshake.
    uri, secret = daemons[kind]
    with connect(uri, secret=secret, timeout=5) as proxy:
        assert proxy.echo(1) == 1
        proxy._pyroSerializer = serializer
        with pytest.raises(Pyro5.errors.SerializeError, match=f"{REFUSED}, not {serializer}"):
            proxy.echo(2)
        proxy._pyroSerializer = "json"
        assert proxy.echo(3) == 3  # the refused payload was dropped: the stream is in step


def raw_connection(uri: Pyro5.api.URI) -> SocketConnection:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(uri.sockname)
    return SocketConnection(sock)


def exchange(conn: SocketConnection, message: protocol.SendingMessage) -> object:
    conn.send(message.data)
    answer = protocol.recv_stub(conn)
    # A refused handshake is answered in marshal by Pyro5 itself; everything else here in JSON.
    if answer.serializer_id == MarshalSerializer.serializer_id:
        return marshal.loads(answer.data)
    return json.loads(bytes(answer.data))


def handshake(secret: str | None) -> bytes:
    return json.dumps({"handshake": secret, "object": "echo"}).encode()


@pytest.mark.parametrize("kind", ["user", "component"])
@pytest.mark.parametrize(("serializer_id", "name"), [(MSGPACK_ID, "msgpack"), (99, "id 99")])
def test_a_raw_handshake_in_another_serializer_is_refused_undecoded(
    daemons: dict, kind: str, serializer_id: int, name: str
) -> None:
    uri, secret = daemons[kind]
    conn = raw_connection(uri)
    try:
        answer = exchange(conn, protocol.SendingMessage(
            protocol.MSG_CONNECT, 0, 0, serializer_id, b"\xc1 not decodable by anything"))
    finally:
        conn.close()
    assert answer == f"{REFUSED}, not {name}"
    with connect(uri, secret=secret, timeout=5) as proxy:
        assert proxy.echo("still serving") == "still serving"


@pytest.mark.parametrize("kind", ["user", "component"])
def test_pre_serialized_arguments_are_refused_because_pyro5_reads_them_with_marshal(
    daemons: dict, kind: str
) -> None:
    uri, secret = daemons[kind]
    json_id = JsonSerializer.serializer_id
    conn = raw_connection(uri)
    try:
        connected = protocol.SendingMessage(protocol.MSG_CONNECT, 0, 0, json_id,
                                            handshake(secret))
        conn.send(connected.data)
        assert protocol.recv_stub(conn).type == protocol.MSG_CONNECTOK
        # Pyro5 would marshal.loads this annotation whatever the message's serializer.
        blob = protocol.SendingMessage(
            protocol.MSG_INVOKE, protocol.FLAGS_KEEPSERIALIZED, 7, json_id, b"{}",
            annotations={"BLBI": marshal.dumps((("x",), "echo", "echo"))})
        conn.send(blob.data)
        answer = protocol.recv_stub(conn)
        assert answer.seq == 7 and answer.flags & protocol.FLAGS_EXCEPTION
        error = json.loads(bytes(answer.data))
        assert error["__class__"] == "Pyro5.errors.SerializeError"
        assert error["args"] == [f"{REFUSED}, not pre-serialized arguments "
                                 "(Pyro5 decodes those with marshal)"]
        # The same connection still serves an ordinary JSON call.
        call = protocol.SendingMessage(protocol.MSG_INVOKE, 0, 8, json_id,
                                       JsonSerializer().dumpsCall("echo", "echo", ("ok",), {}))
        conn.send(call.data)
        answer = protocol.recv_stub(conn)
        assert answer.seq == 8 and json.loads(bytes(answer.data)) == "ok"
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["user", "component"])
def test_a_compressed_message_is_refused_before_it_is_inflated(
    daemons: dict, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pyro5 would inflate a zlib payload before any size check: a decompression bomb."""
    uri, secret = daemons[kind]
    # Pyro5's own client compresses when told to: a megabyte goes out as about a kilobyte.
    monkeypatch.setattr(protocol.config, "COMPRESSION", True)
    bomb = protocol.SendingMessage(protocol.MSG_CONNECT, 0, 0, JsonSerializer.serializer_id,
                                   b"[" * 1_000_000)
    assert bomb.flags & protocol.FLAGS_COMPRESSED and len(bomb.data) < 10_000
    conn = raw_connection(uri)
    try:
        assert exchange(conn, bomb) == "this daemon does not accept compressed messages"
    finally:
        conn.close()
    with connect(uri, secret=secret, timeout=5) as proxy:
        assert proxy.echo("still serving") == "still serving"


@pytest.fixture(scope="module")
def instance() -> Iterator[Instance]:
    running = Instance().start()
    yield running
    running.stop()


@pytest.mark.parametrize("serializer", OTHER_SERIALIZERS)
def test_the_live_daemons_refuse_other_serializers_and_keep_serving(
    instance: Instance, serializer: str
) -> None:
    config = load_config(instance.state_dir)
    secret = config.secret_path.read_text().strip()
    targets = [(f"PYRO:queue-manager-user@./u:{config.user_socket}", None),
               (f"PYRO:scheduler-control@./u:{config.admin_socket}", None),
               (component_uri(config, "queue-manager"), secret),
               (component_uri(config, "system"), secret)]
    for uri, offered in targets:
        with connect(uri, secret=offered, timeout=5) as proxy:
            proxy._pyroSerializer = serializer
            with pytest.raises(Pyro5.errors.CommunicationError, match=REFUSED):
                proxy.ping()
    with connect(component_uri(config, "queue-manager"), secret=secret, timeout=5) as proxy:
        assert proxy.ping() == "queue-manager"
    shown = instance.command("qstat")
    assert shown.returncode == 0, shown.stderr
