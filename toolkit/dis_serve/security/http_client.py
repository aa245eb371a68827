"""The one way dis-serve makes HTTP clients: never through a proxy from the environment, and
against an HTTPS frontend with the graph's own CA (and client certificate, when asked)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where used: httpx costs ~60 ms, which `up` would otherwise spend before the
    # first process starts.
    import ssl

    import httpx

    from .pki_files import EndpointTls


def client_ssl_context(tls: EndpointTls) -> ssl.SSLContext:
    """Trust the graph's CA only (not the system's: nothing else may vouch for the graph's
    frontend) and present its client certificate when there is one."""
    import ssl

    context = ssl.create_default_context(cafile=tls.ca_cert)
    if tls.client_cert is not None:
        context.load_cert_chain(tls.client_cert, tls.client_key)
    return context


def direct_client(timeout_s: float, connect_s: float | None = None,
                  tls: EndpointTls | None = None) -> httpx.Client:
    """An httpx client that talks to the address it is given. trust_env=False: a proxy from
    the environment must never sit between us and a loopback graph (AIPerf's own client
    ignores it too, so what it cannot reach fails here first). With `tls`, https URLs are
    checked against the graph's CA; plain http ones (workers' system ports) are unchanged."""
    import httpx

    timeout = httpx.Timeout(timeout_s, connect=connect_s if connect_s is not None else timeout_s)
    if tls is None:
        return httpx.Client(trust_env=False, timeout=timeout)
    return httpx.Client(trust_env=False, timeout=timeout, verify=client_ssl_context(tls))
