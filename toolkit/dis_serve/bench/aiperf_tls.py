"""AIPerf against an HTTPS frontend: the environment that makes its client trust the graph's
CA and, when the frontend asks for one, present the graph's client certificate.

AIPerf 0.13 takes neither on its command line (read from its sources: `ssl_options` is
declared but unused; aiohttp sessions get `ssl=True`, i.e. `ssl.create_default_context()`).
OpenSSL's own SSL_CERT_FILE / SSL_CERT_DIR give that default context our CA and only ours;
the client certificate goes in through aiperf_site/sitecustomize.py, which AIPerf's
interpreters run at start-up. Paths only: the key stays in its 0600 file.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..security.pki_files import EndpointTls

SITE_DIR = Path(__file__).with_name("aiperf_site")
# The names aiperf_site/sitecustomize.py reads (it cannot import this package: it runs
# before anything else in AIPerf's interpreter).
CLIENT_CERT_ENV = "DIS_SERVE_TLS_CLIENT_CERT"
CLIENT_KEY_ENV = "DIS_SERVE_TLS_CLIENT_KEY"


def aiperf_tls_env(tls: EndpointTls | None) -> dict[str, str]:
    """Variables to add to AIPerf's environment for a frontend reached with `tls`."""
    if tls is None:
        return {}
    # SSL_CERT_DIR: a directory without hashed certificates, so the system's is not
    # consulted either: only the graph's CA vouches for the graph.
    env = {"SSL_CERT_FILE": tls.ca_cert, "SSL_CERT_DIR": str(SITE_DIR)}
    if tls.client_cert is not None:
        inherited = os.environ.get("PYTHONPATH")
        env |= {CLIENT_CERT_ENV: tls.client_cert,
                CLIENT_KEY_ENV: tls.client_key or tls.client_cert,
                "PYTHONPATH": os.pathsep.join([str(SITE_DIR), *([inherited] if inherited
                                                               else [])])}
    return env
