"""Reaching a cobaltlite daemon: the one way every command and component makes a proxy.

Kept apart from the serving side (cobaltlite.rpc.transport) because user commands import only
this: Pyro5's server half, and what checks callers, would add a quarter to qstat's start-up.

Who may receive the secret
--------------------------
A proxy that carries the component secret first finds out, on each connection it makes and
before it sends a byte, which account owns the server end of that connection: SO_PEERCRED on a
Unix socket, the socket tables /proc/net/tcp and /proc/net/tcp6 on loopback TCP. It sends the
secret only to the owner of the secret file or to root, the two accounts that can read that file
anyway; any other account listening there (one that took a component's TCP port while the
component was down, say) is refused with SecurityError, which names the address and the uid.
Both sources give the account that created the listening socket, not whoever reads from it now.

Between hosts the kernel cannot say who listens: a proxy given a TLS context (cobaltlite.rpc.tls)
instead checks, in the TLS handshake and before it sends the secret, that the server's
certificate is signed by the configured CA for the host name dialled, and presents its own.
"""

import ipaddress
import os
import pwd
import socket
import ssl
import struct
import sys
from pathlib import Path
from typing import Any

import Pyro5.client
import Pyro5.core
import Pyro5.errors
from Pyro5 import config, protocol, serializers, socketutil
from Pyro5.callcontext import current_context

from cobaltlite.config import TcpAddress, UnixAddress
from cobaltlite.rpc import json_codec
from cobaltlite.rpc.errors import SecurityError

WIRE_SERIALIZER = "json"
"""Pyro5's JSON serializer: the stdlib's C codec decodes 10,000 job rows in tens of
milliseconds where serpent (literal_eval) took seconds, and it is safe to decode from any
local user; daemons accept nothing else (see cobaltlite.rpc.transport). Components exchange
only plain data (str, int, float, bool, None, lists, dicts)."""

_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_PROC_TCP_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
# A TIME_WAIT entry belongs to no process: the kernel shows it with uid 0.
_TCP_TIME_WAIT = "06"


def connect(
    uri: str | Pyro5.core.URI,
    *,
    secret: str | None = None,
    secret_path: str | os.PathLike[str] | None = None,
    timeout: float = 10.0,
    tls: ssl.SSLContext | None = None,
) -> Pyro5.client.Proxy:
    """Return a proxy for `uri` that offers `secret` in the handshake and waits `timeout` s a reply.

    The connection is made on the first call, and made again on the call after one that broke
    it. With a secret, every connection first checks who listens at the other end (see the
    module's docstring): the server must run as the owner of `secret_path`, the file the secret
    was read from, or as root; without `secret_path` the secret counts as this process's own
    (read_secret accepts only files owned by this account or root). Any other server makes the
    call raise SecurityError before the secret is sent. A daemon that refuses the secret makes
    the call raise Pyro5.errors.CommunicationError("... rejected: component secret refused").
    With `tls` (a client context of cobaltlite.rpc.tls) a TCP connection is made inside TLS and
    the server is known by its certificate instead of its account: a server the CA did not
    certify for the host named in `uri` makes the call raise CommunicationError("cannot connect
    to ...: [SSL: CERTIFICATE_VERIFY_FAILED] ...") before the secret is sent.
    Pyro5 proxies belong to the thread that created them; use one per thread.
    """
    if secret is None:
        proxy = Pyro5.client.Proxy(uri)
    else:
        proxy = _CheckedProxy(uri)
        if proxy._pyroUri.protocol != "PYRO":
            # A name server's answer is not checked: the secret goes to fixed addresses only.
            raise ValueError(f"{uri}: a component secret is only sent to a PYRO: address")
        if secret_path is None:
            owner = (os.geteuid(), "the account of this process")
        else:
            owner = (os.stat(secret_path).st_uid, f"the owner of {secret_path}")
        # object.__setattr__: Proxy's own would take the name for a remote attribute.
        object.__setattr__(proxy, "_secret_owner", owner)
        object.__setattr__(proxy, "_tls", tls)
        proxy._pyroHandshake = secret
    # Pinned so a PYRO_SERIALIZER environment variable cannot change what goes on the wire.
    proxy._pyroSerializer = WIRE_SERIALIZER
    proxy._pyroTimeout = timeout
    return proxy


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket, as the kernel
    recorded them (SO_PEERCRED): the client's at connect(), or the server's at listen()."""
    pid, uid, gid = _PEERCRED.unpack(
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size))
    return pid, uid, gid


class _CheckedProxy(Pyro5.client.Proxy):
    """A proxy that checks who serves at the other end of each connection before the handshake.

    Pyro5 makes every connection of a proxy (first call, metadata, reconnection after a break)
    in its private `__pyroCreateConnection`, which sends the handshake as soon as the socket is
    connected; it has no hook in between. This class replaces that one method, under its
    mangled name, with the same steps plus the check. (Pyro5's `connected_socket` argument is
    no way around it: a proxy made on one sends no handshake and cannot reconnect.)
    """

    _secret_owner: tuple[int, str]  # (uid, what that uid is), set by connect()
    _tls: ssl.SSLContext | None  # set by connect(); used on TCP only
    _pyroConnection: socketutil.SocketConnection | None  # Pyro5's, declared for the type checker

    def _Proxy__pyroCreateConnection(self, replaceUri: bool = False,
                                     connected_socket: socket.socket | None = None) -> bool:
        # Same signature as Pyro5's. Both arguments are for cases connect() excludes: replaceUri
        # for a name looked up in a name server, connected_socket for a socket given to __init__.
        if self._pyroConnection is not None:
            return False
        uri = self._pyroUri
        location = str(UnixAddress(Path(uri.sockname)) if uri.sockname
                       else TcpAddress(uri.host, uri.port))
        tls = None if uri.sockname else self._tls
        try:
            # With a context, Pyro5 wraps the socket before connect(), so the TLS handshake,
            # and the check of the server's certificate and host name, happen in connect().
            sock = socketutil.create_socket(
                connect=uri.sockname or (uri.host, uri.port), reuseaddr=config.SOCK_REUSE,
                timeout=self._pyroTimeout, nodelay=config.SOCK_NODELAY, sslContext=tls)
        except OSError as exc:
            raise Pyro5.errors.CommunicationError(f"cannot connect to {location}: {exc}") from None
        conn = socketutil.SocketConnection(sock, uri.object)
        try:
            if tls is None:  # with TLS the certificate has identified the server
                _check_server(sock, location, *self._secret_owner)
            serializer = serializers.serializers[self._pyroSerializer or config.SERIALIZER]
            data = serializer.dumps({"handshake": self._pyroHandshake, "object": uri.object})
            conn.send(protocol.SendingMessage(
                protocol.MSG_CONNECT, 0, self._pyroSeq, serializer.serializer_id, data,
                annotations=current_context.annotations).data)
            answer = protocol.recv_stub(conn, [protocol.MSG_CONNECTOK, protocol.MSG_CONNECTFAIL])
            # A refused handshake comes back in Pyro5's marshal: safe to decode from a server
            # whose account (or certificate) was just checked.
            reply: Any = (serializers.serializers_by_id[answer.serializer_id].loads(answer.data)
                          if answer.data else "?")
            if answer.type == protocol.MSG_CONNECTFAIL:
                raise Pyro5.errors.CommunicationError(f"connection to {location} rejected: {reply}")
        except BaseException as exc:
            conn.close()
            # As Pyro5 does: whatever breaks the handshake is a CommunicationError for callers.
            if isinstance(exc, Exception) and not isinstance(
                    exc, (SecurityError, Pyro5.errors.CommunicationError)):
                raise Pyro5.errors.CommunicationError(
                    f"cannot connect to {location}: {exc}") from exc
            raise
        self._pyroConnection = conn
        self._pyroLocalSocket = sock.getsockname()
        self._pyroGetMetadata(uri.object, known_metadata=reply["meta"])
        self._pyroValidateHandshake(reply["handshake"])
        return True

    def __copy__(self) -> "_CheckedProxy":
        # Pyro5's copy (one way to hand a proxy to another thread) keeps only its own fields.
        duplicate = super().__copy__()
        object.__setattr__(duplicate, "_secret_owner", self._secret_owner)
        object.__setattr__(duplicate, "_tls", self._tls)
        return duplicate


# Were the method renamed in another Pyro5, the override above would be silently skipped and
# the secret sent unchecked: refuse to run instead.
if not callable(getattr(Pyro5.client.Proxy, "_Proxy__pyroCreateConnection", None)):
    raise ImportError(f"Pyro5 {Pyro5.__version__} no longer makes proxy connections in "
                      "Proxy.__pyroCreateConnection; cobaltlite.rpc.client must be adapted")


def _check_server(sock: socket.socket, location: str, owner: int, owner_is: str) -> None:
    """Raise SecurityError unless the server end of `sock` belongs to `owner` or to root."""
    if sock.family == socket.AF_UNIX:
        uid = peer_credentials(sock)[1]
    else:
        uid = _tcp_server_uid(sock, location)
    if uid in (owner, 0):
        return
    wanted = f"uid {owner} ({_account(owner)}), {owner_is}" + (", or as root" if owner else "")
    raise SecurityError(
        f"refusing to send the component secret to {location}: the process listening there "
        f"runs as uid {uid} ({_account(uid)}), not as {wanted}")


def _tcp_server_uid(sock: socket.socket, location: str) -> int:
    """The uid owning the server end of a connected TCP socket, from Linux's socket tables.

    That end is the entry whose local address is our peer's and whose remote address is ours.
    The kernel prints each address as the hex of its 32-bit words read in host byte order, and
    the port in plain hex; an IPv4 connection accepted by a dual-stack IPv6 socket is listed in
    /proc/net/tcp6 under IPv4-mapped addresses. So each address is written both ways and the
    lines compared as text.
    """
    server = _proc_endpoints(*sock.getpeername()[:2])
    client = _proc_endpoints(*sock.getsockname()[:2])
    uids, unreadable = set(), []
    for table in _PROC_TCP_TABLES:
        try:
            with open(table, encoding="ascii") as lines:
                lines.readline()  # the column titles
                for line in lines:
                    # sl local remote st tx:rx tr:when retrnsmt uid ...
                    fields = line.split()
                    if (fields[3] != _TCP_TIME_WAIT and fields[1] == server[table]
                            and fields[2] == client[table]):
                        uids.add(int(fields[7]))
        except OSError as exc:  # tcp6 is missing on a host without IPv6
            unreadable.append(f"{table}: {exc.strerror}")
    if len(unreadable) == len(_PROC_TCP_TABLES):
        found = f"the kernel's socket tables are not readable here ({'; '.join(unreadable)})"
    elif not uids:
        found = "no socket of the kernel's tables is the server end of this connection"
    elif len(uids) > 1:
        found = f"the server end of this connection is listed under uids {sorted(uids)}"
    else:
        return uids.pop()
    raise SecurityError(f"refusing to send the component secret to {location}: cannot tell "
                        f"which account listens there: {found}")


def _proc_endpoints(host: str, port: int) -> dict[str, str | None]:
    """How `host`:`port` appears in each /proc table (None: it cannot appear there)."""
    address = ipaddress.ip_address(host)
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    if address.version == 4:
        v4, v6 = address.packed, ipaddress.IPv6Address(f"::ffff:{address}").packed
    else:
        v4, v6 = None, address.packed
    return {table: None if packed is None else _proc_form(packed, port)
            for table, packed in zip(_PROC_TCP_TABLES, (v4, v6), strict=True)}


def _proc_form(packed: bytes, port: int) -> str:
    words = (int.from_bytes(packed[i:i + 4], sys.byteorder) for i in range(0, len(packed), 4))
    return "".join(f"{word:08X}" for word in words) + f":{port:04X}"


def _account(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no account"


# Every process that makes a proxy decodes replies with the faster codec (a daemon's process
# too: its peers are reached through here).
json_codec.install()
