"""Pyro5 daemons and proxies for every cobaltlite component and user command.

Who is trusted, and how
-----------------------
* Components prove themselves with the shared secret (cobaltlite.rpc.secret): the client sends it as
  Pyro5's handshake data and the daemon compares it in constant time before any method can be
  called. A daemon that does not identify callers by the kernel must have a secret, so a component
  is never reachable without it. TCP is accepted on loopback only, unless the daemon is given a
  TLS context (cobaltlite.rpc.tls): then the secret travels inside TLS, and a client must also
  present a certificate signed by the configured CA before the handshake is even read. The TLS
  handshake runs in the connection's worker thread, under HANDSHAKE_TIMEOUT, never in the
  accept loop, so a silent client holds one worker, not the daemon.
* Users are identified by the kernel, never by the client. User commands connect to a Unix socket
  served with `peer_credentials=True`; inside a method the server calls `caller_credentials()`,
  which reads SO_PEERCRED from that connection: the pid, uid and gid the kernel recorded when the
  client connected. Clients never send a user name, and no remote method may take one as proof of
  who is calling. `caller_is_admin()` builds on the same uid.

Serializers
-----------
Daemons decode requests with Pyro5's JSON serializer only. Pyro5 lets each message name its
serializer, and marshal (or serpent, msgpack) is not safe to decode from an untrusted client such as
any local user on a 0666 user socket; Pyro5 also decodes the arguments of a "keep serialized"
request with marshal, whatever the serializer. A SecureDaemon reads every message header before
Pyro5 touches the payload and refuses both: a handshake fails with "... rejected: this daemon
accepts only the json serializer, not marshal", a call raises Pyro5.errors.SerializeError with that
message on the client. The daemon keeps serving; the client's connection stays usable with JSON.
cobaltlite.rpc.client.connect() pins JSON on the client side.

Errors across the wire
----------------------
Pyro5 rebuilds only builtin exceptions on the client; any other class arrives as a SerializeError
that hides the message. Remote methods must therefore raise ValueError, PermissionError,
LookupError or RuntimeError with a message a user can act on. As a safety net, every
cobaltlite.errors.CobaltliteError raised in a daemon of this process is sent as its nearest builtin
base class (SecurityError as PermissionError, the others as RuntimeError) with its message.

Those are the expected refusals (with Pyro5's own protocol errors, and a TypeError or
AttributeError raised by Pyro5 itself for a call with wrong arguments or an unknown method). Any
other exception is a fault of the daemon, not of the request: it is logged with its traceback
and a short reference ("rpc.internal_error"), and the client gets only
RuntimeError(INTERNAL_ERROR) naming that reference, without the remote traceback. The daemon
keeps serving. Batched calls are refused (cobaltlite makes none), so every error goes this way.

Timeouts and fair share
-----------------------
A new connection has HANDSHAKE_TIMEOUT seconds to complete the handshake, so silent clients cannot
pin Pyro5's worker threads. After the handshake a connection may stay idle for `idle_timeout`
seconds (None: for ever, which suits components that keep one proxy open; user sockets should set
a limit). Once the first byte of a message has arrived, the whole message must arrive within
MESSAGE_TIMEOUT seconds: a client that sends one byte every few seconds is dropped, not kept.
Every connection holds one of Pyro5's worker threads for its whole life, so on a daemon that
identifies callers by the kernel, one uid may hold at most MAX_CONNECTIONS_PER_UID connections
(handshakes in progress included); a further connection is closed at once, unread (its client
sees the connection closed, and the daemon log says why), and other users are still served.
Root and the daemon's own account are not limited. Proxies wait `timeout` seconds for each reply.

Socket files
------------
The directory holding a socket must be writable only by the daemon's account: the mode is set by
path after bind(), and a socket left by a dead daemon is removed by path. Two daemons started on
the same path at the same instant are not arbitrated; the service manager must start one.
(cobaltlite.rpc.peers.check_address enforces the directory rule for component sockets.)
"""

import contextlib
import grp
import hmac
import ipaddress
import os
import pwd
import secrets
import socket
import ssl
import stat
import threading
import time
from pathlib import Path
from typing import Any

import Pyro5.api
import Pyro5.errors
import Pyro5.server
from Pyro5 import protocol, serializers
from Pyro5.callcontext import current_context
from Pyro5.serializers import JsonSerializer, SerializerBase
from Pyro5.socketutil import SocketConnection, receive_data

from cobaltlite.errors import CobaltliteError, InputError
from cobaltlite.rpc import json_codec
from cobaltlite.rpc.client import peer_credentials as read_peer_credentials
from cobaltlite.rpc.errors import SecurityError
from cobaltlite.rpc.secret import MIN_SECRET_CHARS

HANDSHAKE_TIMEOUT = 5.0
MESSAGE_TIMEOUT = 10.0
# Pyro5's pool has 80 workers (Pyro5.config.THREADPOOL_SIZE): ten users at the limit fill it.
MAX_CONNECTIONS_PER_UID = 8
# Socket file modes: components talk among themselves only; every user may reach the user socket.
COMPONENT_SOCKET_MODE = 0o600
USER_SOCKET_MODE = 0o666
# Probing an existing socket file: a live daemon answers connect() at once.
_PROBE_TIMEOUT = 1.0
_JSON_ID = JsonSerializer.serializer_id
# Pyro5's serializer ids are fixed by its wire protocol; spelled out because msgpack's entry is
# missing from Pyro5's tables when msgpack is not installed, and a client may still send it.
_SERIALIZER_NAMES = {1: "serpent", 2: "marshal", 3: "json", 4: "msgpack"}
_DISCARD_CHUNK = 1 << 16
INTERNAL_ERROR = ("internal error in {service}; the administrator can find details in its log "
                  "(ref {ref})")
# Refusals whose message is meant for the caller; anything else is reported as INTERNAL_ERROR.
_EXPECTED = (ValueError, PermissionError, LookupError, CobaltliteError, Pyro5.errors.PyroError)
_PYRO_SERVER_FILE = Pyro5.server.__file__


class _RefusedMessage(Exception):
    """A request the daemon will not decode, with what its answer needs from the header."""

    def __init__(self, reason: str, message: protocol.ReceivingMessage) -> None:
        super().__init__(reason)
        self.seq = message.seq
        self.serializer_id = message.serializer_id
        self.oneway = bool(message.flags & protocol.FLAGS_ONEWAY)


class _JsonOnlyReader:
    """Reads one client connection for Pyro5, refusing each message that is not JSON.

    Pyro5 picks the decoder from the header of each message and decodes inside `_handshake` and
    `handleRequest`, before any hook a subclass could override. Wrapping the serializers in
    Pyro5's module-level table would also change every client in the process, so the check sits
    where Pyro5 reads instead: installed as one connection's `recv`, this sees each header whole
    before the payload is read. The payload of a refused message is read and dropped, undecoded,
    so the stream stays in step and the refusal is not lost to a connection reset.
    """

    def __init__(self, conn: SocketConnection, daemon: str) -> None:
        self._conn = conn
        self._daemon = daemon
        self._header = b""
        self._payload_left = 0
        self._deadline: float | None = None  # set when a message's first byte arrives
        self._wait_timeout: float | None = None  # the socket's timeout between messages

    def _receive(self, size: int) -> bytes:
        """Read exactly `size` bytes, within MESSAGE_TIMEOUT of the message's first byte."""
        sock = self._conn.sock
        if self._deadline is None:
            # Waiting for a message is governed by the handshake or idle timeout; once it has
            # begun, by the message deadline.
            self._wait_timeout = sock.gettimeout()
            first = receive_data(sock, 1)
            self._deadline = time.monotonic() + MESSAGE_TIMEOUT
            if size == 1:
                return first
            return first + self._receive(size - 1)
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise Pyro5.errors.TimeoutError(
                f"message not received within {MESSAGE_TIMEOUT:g} s")
        sock.settimeout(remaining)
        try:
            return receive_data(sock, size)
        finally:
            sock.settimeout(self._wait_timeout)

    def _message_done(self) -> None:
        self._deadline = None

    def __call__(self, size: int) -> bytes:
        data = self._receive(size)
        if self._payload_left:
            self._payload_left -= len(data)
            if not self._payload_left:
                self._message_done()
            return data
        self._header += data
        if len(self._header) < protocol._header_size:  # the wire protocol's fixed 40 bytes
            return data
        # Parsed by Pyro5 itself (it checks the tag, version, magic number and size limit).
        message = protocol.ReceivingMessage(self._header)
        self._header = b""
        payload = message.annotations_size + message.data_size
        reason = _refusal(message)
        if reason is None:
            self._payload_left = payload
            if not payload:
                self._message_done()
            return data
        while payload:
            payload -= len(self._receive(min(payload, _DISCARD_CHUNK)))
        self._message_done()
        import structlog  # as in validateHandshake: only a daemon that refuses needs it

        structlog.get_logger(__name__).warning(
            "rpc.request_refused", daemon=self._daemon, peer=_describe_peer(self._conn),
            reason=reason)
        raise _RefusedMessage(reason, message)


def _refusal(message: protocol.ReceivingMessage) -> str | None:
    # Only a connect and an invoke carry data Pyro5 decodes; a ping's payload is ignored and
    # recv_stub refuses any other type.
    if message.type not in (protocol.MSG_CONNECT, protocol.MSG_INVOKE):
        return None
    if message.serializer_id != _JSON_ID:
        name = _SERIALIZER_NAMES.get(message.serializer_id, f"id {message.serializer_id}")
        return f"this daemon accepts only the json serializer, not {name}"
    if message.flags & protocol.FLAGS_COMPRESSED:
        # Pyro5 would inflate it before any size check: a few kilobytes could become gigabytes.
        return "this daemon does not accept compressed messages"
    if message.flags & protocol.FLAGS_BATCH:
        # Pyro5 serializes the errors of a batch without passing them through
        # _sendExceptionResponse, where internal errors are hidden.
        return "this daemon does not accept batched calls"
    if message.flags & protocol.FLAGS_KEEPSERIALIZED:
        return ("this daemon accepts only the json serializer, not pre-serialized arguments "
                "(Pyro5 decodes those with marshal)")
    return None


class SecureDaemon(Pyro5.server.Daemon):
    """A Pyro5 daemon that checks the shared secret in the handshake and bounds idle connections."""

    def __init__(
        self,
        *,
        secret: str | None,
        idle_timeout: float | None,
        host: str | None = None,
        port: int = 0,
        unixsocket: str | None = None,
        service: str = "the daemon",
        limit_uids: bool = False,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._secret = None if secret is None else secret.encode()
        self._tls = tls
        self._idle_timeout = idle_timeout
        self._service = service
        self._limit_uids = limit_uids
        self._connections_by_uid: dict[int, int] = {}
        self._count_lock = threading.Lock()
        if not isinstance(serializers.serializers_by_id.get(_JSON_ID), json_codec.JsonCodec):
            # Its loadsCall is the plain-data decoder every request must go through.
            json_codec.install()
        super().__init__(host=host, port=port, unixsocket=unixsocket)
        if tls is not None:
            self._serve_tls(tls)
        # Called by Pyro5 with each exception a remote method raises, oneway calls included.
        self.methodcall_error_handler = _method_failed

    def _serve_tls(self, tls: ssl.SSLContext) -> None:
        """Accept TLS connections: the listening socket is wrapped with the handshake deferred
        (do_handshake_on_connect=False), so accept() returns at once and _handshake does the
        TLS handshake in the connection's worker thread. The socket keeps its file descriptor,
        which Pyro5's accept loop has registered with its selector."""
        server = self.transportServer
        server.sock = tls.wrap_socket(server.sock, server_side=True,
                                      do_handshake_on_connect=False)

    def _handshake(self, conn: SocketConnection, denied_reason: str | None = None) -> bool:
        # Pyro5's own hook for the handshake (it has no public one that runs before the handshake
        # is read); without a timeout here a client that connects and says nothing holds a worker.
        conn.sock.settimeout(HANDSHAKE_TIMEOUT)
        if self._tls is not None and not self._tls_handshake(conn):
            return False
        # Set on this connection object only, not on the class: every message of this connection,
        # the handshake first, goes through the check, and nothing else in the process does.
        # A refused handshake reaches Pyro5's own failure path, which answers the client.
        conn.recv = _JsonOnlyReader(conn, self.locationStr)
        if self._limit_uids and not self._count_connection(conn):
            # Closed unread: answering the refusal would mean reading the client's handshake,
            # which a hostile client sends slowly, holding the worker this limit protects.
            return False
        accepted = False
        try:
            # The handshake data is request content too: plain data only, no class hooks.
            with json_codec.decoding_requests():
                accepted = super()._handshake(conn, denied_reason)
            return accepted
        finally:
            if not accepted:  # Pyro5 calls clientDisconnect only for accepted connections
                self.clientDisconnect(conn)

    def _tls_handshake(self, conn: SocketConnection) -> bool:
        """The TLS handshake of a new connection: False (logged, connection to be closed) for a
        client without a certificate of the configured CA, or one that does not speak TLS."""
        try:
            conn.sock.do_handshake()
            return True
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            import structlog  # as in validateHandshake: only a daemon that refuses needs it

            structlog.get_logger(__name__).warning(
                "rpc.tls_refused", daemon=self.locationStr, peer=_describe_peer(conn),
                reason=str(exc))
            return False

    def _count_connection(self, conn: SocketConnection) -> bool:
        """Count `conn` against its uid; False if the uid already holds its share."""
        try:
            uid = _peer_credentials(conn.sock)[1]
        except SecurityError:
            return True
        if uid in (0, os.geteuid()):
            return True
        with self._count_lock:
            held = self._connections_by_uid.get(uid, 0)
            if held < MAX_CONNECTIONS_PER_UID:
                self._connections_by_uid[uid] = held + 1
                conn.counted_uid = uid
                return True
        import structlog

        structlog.get_logger(__name__).warning(
            "rpc.connection_refused", daemon=self.locationStr, uid=uid,
            reason=f"uid holds {MAX_CONNECTIONS_PER_UID} connections already")
        return False

    def clientDisconnect(self, conn: SocketConnection) -> None:
        uid = getattr(conn, "counted_uid", None)
        if uid is None:
            return
        conn.counted_uid = None
        with self._count_lock:
            left = self._connections_by_uid[uid] - 1
            if left:
                self._connections_by_uid[uid] = left
            else:
                del self._connections_by_uid[uid]

    def handleRequest(self, conn: SocketConnection) -> None:
        try:
            super().handleRequest(conn)
        except _RefusedMessage as refused:
            # Pyro5 answers nothing when reading a request fails; this client must learn why.
            # The answer uses the client's serializer, as its proxy insists (encoding our own
            # message is safe; only decoding is not), or JSON if this host lacks that one.
            if not refused.oneway:
                answer_with = (refused.serializer_id
                               if refused.serializer_id in serializers.serializers_by_id
                               else _JSON_ID)
                self._sendExceptionResponse(conn, refused.seq, answer_with,
                                            Pyro5.errors.SerializeError(str(refused)), None)

    def _sendExceptionResponse(self, connection: SocketConnection, seq: int, serializer_id: int,
                               exc_value: BaseException, tbinfo: Any, flags: int = 0,
                               annotations: Any = None) -> None:
        # Every error reply of Pyro5 goes through here: keep refusals, hide internal errors.
        if not _expected(exc_value):
            ref = getattr(exc_value, "_cobaltlite_ref", None) or _log_internal_error(
                self, exc_value, method=None)
            exc_value = RuntimeError(INTERNAL_ERROR.format(service=self._service, ref=ref))
            tbinfo = None
        super()._sendExceptionResponse(connection, seq, serializer_id, exc_value, tbinfo,
                                       flags, annotations)

    def validateHandshake(self, conn: SocketConnection, data: Any) -> str:
        if self._secret is not None:
            offered = data.encode() if isinstance(data, str) else b""
            if not hmac.compare_digest(offered, self._secret):
                # Imported here: structlog costs user commands ~70 ms of start-up, and only a
                # daemon ever refuses a handshake.
                import structlog

                structlog.get_logger(__name__).warning(
                    "rpc.handshake_refused", daemon=self.locationStr, peer=_describe_peer(conn)
                )
                # Pyro5 sends this message to the client in its "connection rejected" error.
                raise PermissionError("component secret refused")
        conn.sock.settimeout(self._idle_timeout)
        return "ok"


def _expected(exc: BaseException) -> bool:
    if isinstance(exc, _EXPECTED):
        return True
    if isinstance(exc, (TypeError, AttributeError)):
        # Raised by Pyro5 itself (wrong arguments, unknown method): the innermost frame is its own.
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        return tb is not None and tb.tb_frame.f_code.co_filename == _PYRO_SERVER_FILE
    return False


def _log_internal_error(daemon: Any, exc: BaseException, method: str | None) -> str:
    import structlog  # as in validateHandshake: only a daemon that fails needs it

    ref = secrets.token_hex(4)
    with contextlib.suppress(AttributeError):  # an exception class with __slots__
        exc._cobaltlite_ref = ref  # type: ignore[attr-defined]
    structlog.get_logger(__name__).error(
        "rpc.internal_error", daemon=getattr(daemon, "locationStr", None), method=method,
        ref=ref, error=f"{type(exc).__module__}.{type(exc).__qualname__}", exc_info=exc)
    return ref


def _method_failed(daemon: Any, client_sock: Any, method: Any, vargs: Any, kwargs: Any,
                   exc: BaseException) -> None:
    if not _expected(exc):
        _log_internal_error(daemon, exc, method=getattr(method, "__name__", str(method)))


def serve(
    obj: object,
    *,
    unix_socket: Path | None = None,
    socket_mode: int = COMPONENT_SOCKET_MODE,
    host: str = "127.0.0.1",
    port: int = 0,
    object_id: str,
    secret: str | None,
    peer_credentials: bool = False,
    idle_timeout: float | None = None,
    service: str | None = None,
    tls: ssl.SSLContext | None = None,
) -> tuple[SecureDaemon, Pyro5.api.URI]:
    """Create a daemon serving `obj` as `object_id`; return it and the URI clients connect to.

    With `unix_socket` the daemon listens on that path and the socket file gets `socket_mode`
    (COMPONENT_SOCKET_MODE or USER_SOCKET_MODE); a socket file left by a dead daemon is removed,
    but a live daemon's socket is never taken over. Otherwise it listens on `host` and `port`
    (0: any free port): a loopback host, or any host with `tls` (a server context of
    cobaltlite.rpc.tls), which then serves TLS only, to clients with a certificate of its CA.

    `secret`: when given, only clients whose handshake carries it may call. It may be None only
    with `peer_credentials=True`, which marks a user-command daemon whose callers are identified
    by the kernel (see caller_credentials) and therefore needs a Unix socket.

    `service` names the daemon in the message users get for an internal error ("the queue
    manager"); by default "the <object_id> daemon".

    The daemon does not serve until its request loop runs (serve_in_thread, or requestLoop).
    """
    if peer_credentials and unix_socket is None:
        raise ValueError("peer credentials are only available on a Unix socket; give unix_socket")
    if secret is None and not peer_credentials:
        raise ValueError(
            "a daemon needs a secret unless it identifies callers by their Unix socket "
            "credentials (peer_credentials=True)"
        )
    if secret is not None and len(secret) < MIN_SECRET_CHARS:
        raise ValueError(f"the secret must have at least {MIN_SECRET_CHARS} characters")
    service = service or f"the {object_id} daemon"
    if unix_socket is None:
        if tls is None:
            _require_loopback(host)
        daemon = SecureDaemon(secret=secret, idle_timeout=idle_timeout, host=host, port=port,
                              service=service, tls=tls)
    else:
        unix_socket = Path(unix_socket)
        _remove_stale_socket(unix_socket)
        daemon = SecureDaemon(secret=secret, idle_timeout=idle_timeout, unixsocket=str(unix_socket),
                              service=service, limit_uids=peer_credentials)
    try:
        if unix_socket is not None:
            # bind() applied the umask; set the mode the caller asked for.
            os.chmod(unix_socket, socket_mode)
        uri = daemon.register(obj, objectId=object_id)
    except BaseException:
        daemon.close()
        raise
    return daemon, uri


def serve_in_thread(daemon: SecureDaemon) -> threading.Thread:
    """Run the daemon's request loop in a background thread (which dies with the process)."""
    thread = threading.Thread(
        target=daemon.requestLoop, name=f"rpc {daemon.locationStr}", daemon=True
    )
    thread.start()
    return thread


def shutdown(daemon: SecureDaemon) -> None:
    """Stop the request loop, close every connection and remove the daemon's Unix socket file.

    Safe to call twice, and on a daemon whose loop never ran.
    """
    daemon.shutdown()


def caller_credentials() -> tuple[int, int, int]:
    """Return (pid, uid, gid) of the process on the other end of the current remote call.

    Call it inside an exposed method. The values come from the kernel (SO_PEERCRED, recorded when
    the client connected), never from anything the client sent; this is the only caller identity a
    cobaltlite server trusts. Raises SecurityError outside a remote call or when the call did not
    come over a Unix socket.
    """
    conn = current_context.client
    if conn is None:
        raise SecurityError("caller identity requested outside a remote call")
    return _peer_credentials(conn.sock)


def caller_is_admin(admin_group: str | None) -> bool:
    """Whether the caller of the current remote call may use admin operations (see uid_is_admin)."""
    return uid_is_admin(caller_credentials()[1], admin_group)


def uid_is_admin(uid: int, admin_group: str | None) -> bool:
    """Whether `uid` is an administrator: root, the account this daemon runs as, or a member of
    `admin_group` (as primary group or supplementary member, per the passwd and group databases).

    The daemon's own account counts because a daemon run unprivileged by a service account is
    administered by that account, which can already read its secret, database and socket.
    A configured `admin_group` that does not exist raises LookupError: fail closed, but loudly.
    """
    if uid in (0, os.geteuid()):
        return True
    if admin_group is None:
        return False
    try:
        group = grp.getgrnam(admin_group)
    except KeyError:
        raise LookupError(f"admin group {admin_group!r} does not exist on this host") from None
    try:
        user = pwd.getpwuid(uid)
    except KeyError:
        return False  # no account, so no group membership either
    return user.pw_gid == group.gr_gid or user.pw_name in group.gr_mem


def _require_loopback(host: str) -> None:
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback:
        raise ValueError(
            f"refusing to listen on {host}: the secret would cross the network in clear; "
            "use a loopback address or a Unix socket, or configure tls: (docs/multi-host.md)"
        )


def _remove_stale_socket(path: Path) -> None:
    """Remove a socket file whose daemon is gone; refuse if a daemon still answers on it."""
    try:
        info = path.lstat()
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise InputError(f"{path} exists and is not a socket; refusing to replace it")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(_PROBE_TIMEOUT)
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            # Nobody listens: the file was left behind by a daemon that died.
            path.unlink(missing_ok=True)
            return
        except OSError as exc:
            raise InputError(f"cannot tell whether a daemon serves on {path}: {exc}") from None
    raise InputError(f"a daemon is already serving on {path}; stop it before starting another")


def _peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    if sock.family != socket.AF_UNIX:
        raise SecurityError(
            "caller identity is only known for calls over a Unix socket; this call came over "
            f"{socket.AddressFamily(sock.family).name}"
        )
    try:
        return read_peer_credentials(sock)
    except OSError as exc:
        raise SecurityError(f"cannot read the caller's credentials: {exc.strerror}") from None


def _describe_peer(conn: SocketConnection) -> str:
    # For the refusal log: on a Unix socket the kernel says who tried, on TCP the address does.
    try:
        if conn.sock.family == socket.AF_UNIX:
            pid, uid, _ = _peer_credentials(conn.sock)
            return f"pid {pid} uid {uid}"
        host, port = conn.sock.getpeername()[:2]
    except OSError:  # includes SecurityError; a peer that already left is not worth failing for
        return "unknown"
    return f"{host}:{port}"


def _as_builtin_exception(exc: CobaltliteError) -> dict[str, Any]:
    builtin = next(
        (
            cls
            for cls in type(exc).__mro__
            if cls.__module__ == "builtins" and issubclass(cls, Exception) and cls is not Exception
        ),
        RuntimeError,
    )
    # The shape Pyro5's serializers give exceptions, naming a class every client can rebuild.
    return {
        "__class__": f"builtins.{builtin.__name__}",
        "__exception__": True,
        "args": (str(exc),),
        "attributes": {"_pyroTraceback": getattr(exc, "_pyroTraceback", None)},
    }


# Registered on import: serve() lives here, so every process that runs a daemon has the
# translation in place before its first reply.
SerializerBase.register_class_to_dict(CobaltliteError, _as_builtin_exception)
