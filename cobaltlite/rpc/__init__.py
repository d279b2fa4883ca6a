"""The RPC layer: Pyro5 daemons and proxies, the shared component secret, and caller identity.

`transport` serves and reaches components; `secret` creates and reads the 0600 secret file;
`errors` holds the one exception type this layer adds.
"""
