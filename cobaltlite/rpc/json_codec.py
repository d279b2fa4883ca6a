"""Pyro5's JSON serializer, decoding large replies without a second pass in Python.

Pyro5's JsonSerializer decodes with the C codec and then walks the whole result in Python
(`recreate_classes`) looking for dicts that stand for exceptions or other classes. For a
10,000-job listing that walk made 140,000 calls and took longer than the decoding itself. Here
the same check runs as the decoder's `object_hook`, which the C codec calls for dicts only; job
rows travel as lists, so it is called a handful of times. What comes out is the same.

`install()` puts this serializer in Pyro5's tables under JSON's name and id, because Pyro5
looks serializers up there for every message; cobaltlite.rpc.client installs it on import, so
every proxy of a cobaltlite process, and every daemon in a process that makes proxies, uses it.

Requests are plain data. Reviving classes is for replies only (a client must rebuild the
exceptions a daemon sends). What a daemon decodes from a client, the arguments of a call
(`loadsCall`, which only daemons use) and the handshake data (`loads` inside `decoding_requests()`),
goes through no class hook at all: a dict with a "__class__" key is refused with ValueError
REFUSED_CLASS, so request content can never make a daemon build a proxy, an exception or any
registered class, nor open a connection.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

from Pyro5 import serializers

REFUSED_CLASS = "request arguments must be plain data (a dict may not have a '__class__' key)"

REFUSED_SURROGATE = "request arguments must be valid Unicode text (no lone surrogates)"
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89abcdefABCDEF]")

# Set by a daemon's thread while it decodes a handshake; that thread makes no call of its own
# meanwhile, so no reply is decoded under it.
_requests = threading.local()


@contextlib.contextmanager
def decoding_requests() -> Iterator[None]:
    """Within this block, `loads` in this thread decodes plain data only (see the module doc)."""
    previous = getattr(_requests, "active", False)
    _requests.active = True
    try:
        yield
    finally:
        _requests.active = previous


def _lone_surrogate_at(value: Any, where: str) -> str | None:
    """Where in `value` a string holds a lone surrogate (e.g. "argument 1, 'env', 'BAD'")."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return where
        return None
    if isinstance(value, dict):
        for key, item in value.items():
            # ascii(): the key itself may hold the surrogate, and the message must encode.
            found = (_lone_surrogate_at(key, f"{where}, a key") or
                     _lone_surrogate_at(item, f"{where}, {key!a}"))
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _lone_surrogate_at(item, f"{where}, item {index}")
            if found:
                return found
    return None


def _plain_data(obj: dict[str, Any]) -> dict[str, Any]:
    if "__class__" in obj:
        raise ValueError(REFUSED_CLASS)
    return obj


class JsonCodec(serializers.JsonSerializer):
    def loads(self, data: Any) -> Any:
        hook = _plain_data if getattr(_requests, "active", False) else self._revive
        return json.loads(self._convertToBytes(data), object_hook=hook)

    def loadsCall(self, data: Any) -> tuple[Any, Any, Any, Any]:
        # Only a daemon decodes calls: never any class hook here.
        try:
            call = json.loads(self._convertToBytes(data), object_hook=_plain_data)
        except RecursionError:
            raise ValueError("request arguments are nested too deeply") from None
        # A lone surrogate can only arrive as a \\u escape; a reply holding it could not be
        # encoded, and the client would get a serialization failure instead of an answer.
        if _SURROGATE_ESCAPE.search(self._convertToBytes(data)):
            found = (_lone_surrogate_at(call["params"], "argument list") or
                     _lone_surrogate_at(call["kwargs"], "keyword arguments"))
            if found:
                raise ValueError(f"{REFUSED_SURROGATE}: at {found}")
        return call["object"], call["method"], call["params"], call["kwargs"]

    def _revive(self, obj: dict[str, Any]) -> Any:
        # Called innermost first. Pyro5's walk does not look inside a class dict, but no
        # class Pyro5 or cobaltlite sends (exceptions, proxies) holds another, so it is the same.
        return self.dict_to_class(obj) if "__class__" in obj else obj


def install() -> None:
    codec = JsonCodec()
    serializers.serializers["json"] = codec
    serializers.serializers_by_id[codec.serializer_id] = codec
