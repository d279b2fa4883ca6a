"""TLS contexts for components and node agents, built from the `tls:` option.

Both ends authenticate: a daemon demands a client certificate signed by the configured CA
(Pyro5's SSL_REQUIRECLIENTCERT), a client checks the daemon's certificate against the same CA
and the host name it dialled. The shared secret is still required in the Pyro5 handshake, which
now travels inside TLS.

Why not Pyro5's own switch (config.SSL with SSL_SERVERCERT, SSL_CACERTS, ...): Pyro5 builds one
server and one client context per process from its global config and caches them, and its
server wraps the listening socket so that the TLS handshake runs in accept(), in the daemon's
single accept loop, where a client that connects and says nothing would stall every other
client. cobaltlite makes the same contexts (ssl.create_default_context, as Pyro5 does) per
daemon and per proxy, hands the client's to Pyro5's socketutil.create_socket (its sslContext
argument), and runs the server's handshake in the connection's worker thread under
HANDSHAKE_TIMEOUT (cobaltlite.rpc.transport).
"""

from __future__ import annotations

import ssl

from cobaltlite.config import TlsFiles
from cobaltlite.errors import InputError


def server_context(files: TlsFiles) -> ssl.SSLContext:
    """A context that serves with this host's certificate and accepts only clients whose
    certificate the CA signed."""
    context = _context(ssl.Purpose.CLIENT_AUTH, files)
    context.verify_mode = ssl.CERT_REQUIRED
    return context


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """A context that presents this host's certificate and accepts only servers whose
    certificate the CA signed for the host name dialled."""
    return _context(ssl.Purpose.SERVER_AUTH, files)


def _context(purpose: ssl.Purpose, files: TlsFiles) -> ssl.SSLContext:
    context = ssl.create_default_context(purpose)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_verify_locations(cafile=str(files.ca))
    except (ssl.SSLError, OSError) as exc:
        raise InputError(f"tls.ca: {files.ca}: not a readable PEM CA certificate: {exc}") from None
    try:
        context.load_cert_chain(str(files.cert), str(files.key))
    except (ssl.SSLError, OSError) as exc:
        raise InputError(f"tls.cert {files.cert} with tls.key {files.key}: cannot load them "
                         f"(a key that does not match the certificate, or not PEM): {exc}"
                         ) from None
    return context
