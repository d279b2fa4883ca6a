"""Pyro5's JSON serializer, decoding large replies without a second pass in Python.

Pyro5's JsonSerializer decodes with the C codec and then walks the whole result in Python
(`recreate_classes`) looking for dicts that stand for exceptions or other classes. For a
10,000-job listing that walk made 140,000 calls and took longer than the decoding itself. Here
the same check runs as the decoder's `object_hook`, which the C codec calls for dicts only; job
rows travel as lists, so it is called a handful of times. What comes out is the same.

`install()` puts this serializer in Pyro5's tables under JSON's name and id, because Pyro5
looks serializers up there for every message; cobaltlite.rpc.client installs it on import, so
every proxy of a cobaltlite process, and every daemon in a process that makes proxies, uses it.
"""

from __future__ import annotations

import json
from typing import Any

from Pyro5 import serializers


class JsonCodec(serializers.JsonSerializer):
    def loads(self, data: Any) -> Any:
        return json.loads(self._convertToBytes(data), object_hook=self._revive)

    def loadsCall(self, data: Any) -> tuple[Any, Any, Any, Any]:
        call = self.loads(data)
        return call["object"], call["method"], call["params"], call["kwargs"]

    def _revive(self, obj: dict[str, Any]) -> Any:
        # Called innermost first. Pyro5's walk does not look inside a class dict, but no
        # class Pyro5 or cobaltlite sends (exceptions, proxies) holds another, so it is the same.
        return self.dict_to_class(obj) if "__class__" in obj else obj


def install() -> None:
    codec = JsonCodec()
    serializers.serializers["json"] = codec
    serializers.serializers_by_id[codec.serializer_id] = codec
