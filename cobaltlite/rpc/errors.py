"""The exception the RPC layer raises when a security rule is not met."""

from cobaltlite.errors import CobaltliteError


class SecurityError(CobaltliteError, PermissionError):
    """A secret file, socket or caller does not meet the rules that protect the components.

    It is also a PermissionError so that, raised inside a remote method, it reaches the client as
    the builtin PermissionError with the same message (see cobaltlite.rpc.transport).
    """
