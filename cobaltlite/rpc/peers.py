"""Reaching another component: its Unix socket, the shared secret, one proxy per thread."""

from __future__ import annotations

import threading
from typing import Any

import Pyro5.api

from cobaltlite.config import Config
from cobaltlite.rpc.secret import read_secret
from cobaltlite.rpc.transport import connect


def component_uri(config: Config, component: str) -> str:
    return f"PYRO:{component}@./u:{config.socket(component)}"


class Peer:
    """Calls on a component as if it were local. Pyro5 proxies belong to one thread, so each
    thread that calls gets its own connection."""

    def __init__(self, config: Config, component: str, timeout: float = 30.0) -> None:
        self._uri = component_uri(config, component)
        self._secret = read_secret(config.secret_path)
        self._timeout = timeout
        self._local = threading.local()

    def _proxy(self) -> Pyro5.api.Proxy:
        proxy = getattr(self._local, "proxy", None)
        if proxy is None:
            proxy = connect(self._uri, secret=self._secret, timeout=self._timeout)
            self._local.proxy = proxy
        return proxy

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._proxy(), name)
