"""Serving a component and reaching one: its address, the shared secret, one proxy per thread.

A component's address comes from `Config.address` alone (its `addresses:` entry, else its socket
under `sockets/`); `serve_component` listens there and `component_uri` points clients there, so
the two cannot disagree. On TCP with `tls:` configured both ends use TLS (cobaltlite.rpc.tls).
"""

from __future__ import annotations

import os
import ssl
import stat
import threading
from typing import Any

import Pyro5.api

from cobaltlite.config import Address, Config, UnixAddress
from cobaltlite.errors import InputError
from cobaltlite.rpc.client import connect
from cobaltlite.rpc.errors import SecurityError
from cobaltlite.rpc.secret import read_secret
from cobaltlite.rpc.tls import client_context, server_context
from cobaltlite.rpc.transport import (
    COMPONENT_SOCKET_MODE,
    SecureDaemon,
    serve,
    serve_in_thread,
)


def check_address(address: Address) -> None:
    """Refuse a Unix socket whose directory another account may write to.

    Such an account could put its own socket at the path while the component is down: the
    directory must belong to root or to this account and be writable by its owner only. Clients
    would not send that socket the secret (they check the account behind every connection, see
    cobaltlite.rpc.client, which is also what guards TCP ports), but the component would be
    unreachable; this check says why at start instead.
    """
    if not isinstance(address, UnixAddress):
        return
    directory = address.path.parent
    try:
        info = directory.stat()
    except FileNotFoundError:
        raise InputError(f"{address}: directory {directory} does not exist") from None
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid not in (0, os.geteuid()) or mode & 0o022:
        raise SecurityError(
            f"{address}: directory {directory} (owner uid {info.st_uid}, mode {mode:04o}) may be "
            f"written by another account, which could stand in for the component and receive "
            f"the secret; it must belong to root or uid {os.geteuid()} and be writable by its "
            "owner only"
        )


def component_uri(config: Config, component: str) -> str:
    return _uri(component, config.address(component))


def _uri(object_id: str, address: Address) -> str:
    check_address(address)
    if isinstance(address, UnixAddress):
        return f"PYRO:{object_id}@./u:{address.path}"
    return f"PYRO:{object_id}@{address.host_port}"


def serve_component(config: Config, component: str, api: object,
                    address: Address | None = None) -> SecureDaemon:
    """Serve `api` as `component` at its address (or at `address`) to clients holding the
    secret, over TLS on TCP when `tls:` is configured; the request loop runs in a background
    thread."""
    address = address or config.address(component)
    check_address(address)
    secret = read_secret(config.secret_path)
    try:
        if isinstance(address, UnixAddress):
            daemon, _uri = serve(api, unix_socket=address.path,
                                 socket_mode=COMPONENT_SOCKET_MODE, object_id=component,
                                 secret=secret)
        else:
            tls = None if config.tls is None else server_context(config.tls)
            daemon, _uri = serve(api, host=address.host, port=address.port,
                                 object_id=component, secret=secret, tls=tls)
    except OSError as exc:  # bind() alone does not say where: "Address already in use"
        raise InputError(f"cannot listen on {address}: {exc.strerror or exc}") from None
    serve_in_thread(daemon)
    return daemon


class Peer:
    """Calls on a component as if it were local. Pyro5 proxies belong to one thread, so each
    thread that calls gets its own connection.

    The secret goes only to a server running as the owner of the secret file or as root; each
    connection is checked, so is the new one a proxy makes after its component restarted (see
    cobaltlite.rpc.client). A call refused for that raises SecurityError naming the address and
    the account listening there."""

    def __init__(self, config: Config, component: str, timeout: float = 30.0,
                 address: Address | None = None) -> None:
        """`address`: where `component` listens when it is not a configured component (a node
        agent); by default its configured address."""
        address = address or config.address(component)
        self._uri = _uri(component, address)
        self._secret_path = config.secret_path
        self._secret = read_secret(config.secret_path)
        self._timeout = timeout
        self._tls: ssl.SSLContext | None = None
        if config.tls is not None and not isinstance(address, UnixAddress):
            self._tls = client_context(config.tls)
        self._local = threading.local()

    def _proxy(self) -> Pyro5.api.Proxy:
        proxy = getattr(self._local, "proxy", None)
        if proxy is None:
            proxy = connect(self._uri, secret=self._secret, secret_path=self._secret_path,
                            timeout=self._timeout, tls=self._tls)
            self._local.proxy = proxy
        return proxy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._proxy(), name)
