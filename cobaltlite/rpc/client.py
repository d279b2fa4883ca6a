"""Reaching a cobaltlite daemon: the one way every command and component makes a proxy.

Kept apart from the serving side (cobaltlite.rpc.transport) because user commands import only
this: Pyro5's server half, and what checks callers, would add a quarter to qstat's start-up.
"""

import Pyro5.client
import Pyro5.core

from cobaltlite.rpc import json_codec

WIRE_SERIALIZER = "json"
"""Pyro5's JSON serializer: the stdlib's C codec decodes 10,000 job rows in tens of
milliseconds where serpent (literal_eval) took seconds, and it is safe to decode from any
local user; daemons accept nothing else (see cobaltlite.rpc.transport). Components exchange
only plain data (str, int, float, bool, None, lists, dicts)."""


def connect(
    uri: str | Pyro5.core.URI, *, secret: str | None = None, timeout: float = 10.0
) -> Pyro5.client.Proxy:
    """Return a proxy for `uri` that offers `secret` in the handshake and waits `timeout` s a reply.

    The connection is made on the first call. A daemon that refuses the secret makes that call
    raise Pyro5.errors.CommunicationError("... rejected: component secret refused"). Pyro5 proxies
    belong to the thread that created them; use one per thread.
    """
    proxy = Pyro5.client.Proxy(uri)
    # Pinned so a PYRO_SERIALIZER environment variable cannot change what goes on the wire.
    proxy._pyroSerializer = WIRE_SERIALIZER
    proxy._pyroTimeout = timeout
    if secret is not None:
        proxy._pyroHandshake = secret
    return proxy


# Every process that makes a proxy decodes replies with the faster codec (a daemon's process
# too: its peers are reached through here).
json_codec.install()
