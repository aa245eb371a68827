"""Run at start-up by AIPerf's interpreter, and by each of its service processes, when
dis-serve benches a frontend that asks for client certificates (bench/aiperf_tls.py puts
this directory first on their PYTHONPATH).

AIPerf 0.13 has no option for a CA or a client certificate: its aiohttp sessions verify with
`ssl.create_default_context()` (which takes the CA from SSL_CERT_FILE, set beside this).
Here client-side contexts made that way also present the certificate and key the two
variables below name. Without them this does nothing; any other sitecustomize on the path
still runs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import ssl
import sys

CLIENT_CERT_ENV = "DIS_SERVE_TLS_CLIENT_CERT"
CLIENT_KEY_ENV = "DIS_SERVE_TLS_CLIENT_KEY"


def _present_client_certificate(cert: str, key: str | None) -> None:
    original = ssl.create_default_context

    def create_default_context(purpose=ssl.Purpose.SERVER_AUTH, **kwargs):
        context = original(purpose, **kwargs)
        if purpose == ssl.Purpose.SERVER_AUTH:  # a client's context, not a server's
            context.load_cert_chain(cert, key)
        return context

    ssl.create_default_context = create_default_context


def _run_next_sitecustomize() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != __file__:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


if os.environ.get(CLIENT_CERT_ENV):
    _present_client_certificate(os.environ[CLIENT_CERT_ENV], os.environ.get(CLIENT_KEY_ENV))
_run_next_sitecustomize()
