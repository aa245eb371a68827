"""What `top` watches and the scraping itself: a graph started elsewhere, known by its
frontend's page alone (a graph of ours: its handle's `metrics_layout`); then every
`/metrics` fetched once per scrape."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..coordination.traffic import ROUTER_REGISTERED
from ..topology import PoolRole
from .frame import GraphLayout, GraphScrape
from .prom_window import Page, parse_page

if TYPE_CHECKING:
    import httpx


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]


def layout_from_url(url: str, frontend: Page) -> GraphLayout:
    """A graph known only by its frontend: pools from the workers its router registered
    (the router counts aggregated workers as decode workers)."""
    kinds = {s.labels.get("worker_type") for s in frontend.select(ROUTER_REGISTERED)}
    pools = [PoolRole.PREFILL, PoolRole.DECODE] if "prefill" in kinds else [PoolRole.AGG]
    return GraphLayout(name=_host_of(url), frontend_metrics_url=f"{url.rstrip('/')}/metrics",
                       pools=pools)


def fetch(client: httpx.Client, url: str) -> Page | None:
    import httpx

    try:
        response = client.get(url)
        response.raise_for_status()
    except httpx.HTTPError:
        return None
    return parse_page(response.text)


def scrape(client: httpx.Client, urls: list[str]) -> GraphScrape:
    """One page per URL, one after the other: a handful of local GETs cost less than a
    thread pool, and the CPU they take from the graph is what `top` must keep small."""
    pages = {url: fetch(client, url) for url in urls}
    return GraphScrape(at_s=time.monotonic(), pages=pages)
