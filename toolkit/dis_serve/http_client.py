"""The one way dis-serve makes HTTP clients: never through a proxy from the environment."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # Imported where used: httpx costs ~60 ms, which `up` would otherwise spend before the
    # first process starts.
    import httpx


def direct_client(timeout_s: float, connect_s: float | None = None) -> httpx.Client:
    """An httpx client that talks to the address it is given. trust_env=False: a proxy from
    the environment must never sit between us and a loopback graph (AIPerf's own client
    ignores it too, so what it cannot reach fails here first)."""
    import httpx

    timeout = httpx.Timeout(timeout_s, connect=connect_s if connect_s is not None else timeout_s)
    return httpx.Client(trust_env=False, timeout=timeout)
