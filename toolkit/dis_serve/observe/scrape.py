"""What `top` watches and the scraping itself: a graph's layout from its run directory (the
launch plan's metrics ports, the supervisor's state for readiness and restarts, the
topology's batch sizes; on several nodes, what their agents wrote) or, for a graph started
elsewhere, from its frontend's page alone; then every `/metrics` fetched once per scrape."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ..coordination.traffic import ROUTER_REGISTERED
from ..launch.run_lookup import find_run
from ..render.cluster_plan import CLUSTER_PLAN_FILE
from ..topology import PoolRole, ProcessKind
from .frame import GraphLayout, GraphScrape, WorkerTarget
from .prom_window import Page, parse_page

if TYPE_CHECKING:
    import httpx


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]


def layout_from_run(name: str | None, root: Path | None = None) -> GraphLayout:
    """The layout of graph `name` (the only running one when None) from its run directory
    (a multi-node graph's from its agents' files: cluster_layout.py)."""
    run = find_run(name, root)
    if not run.plan_file.is_file() and (run.path / CLUSTER_PLAN_FILE).is_file():
        from .cluster_layout import layout_from_cluster_run

        return layout_from_cluster_run(run)
    plan, topo, state = run.read_plan(), run.read_topology(), run.read_state()
    host = _host_of(state.endpoint if state else plan.endpoint)
    processes = {p.name: p for p in state.processes} if state else {}
    workers = []
    for spec in plan.workers:
        assert spec.role is not None
        observed = processes.get(spec.name)
        workers.append(WorkerTarget(
            name=spec.name, pool=spec.role,
            metrics_url=f"http://{host}:{spec.ports['system']}/metrics",
            ready=observed.ready if observed else None,
            restarts=observed.restarts if observed else None))
    endpoint = (state.endpoint if state else plan.endpoint).rstrip("/")
    frontend = next((processes.get(p.name) for p in plan.processes
                     if p.kind is ProcessKind.FRONTEND), None)
    return GraphLayout(name=run.name, frontend_metrics_url=f"{endpoint}/metrics",
                       pools=[role for role, _ in topo.active_pools()], workers=workers,
                       batch_capacity={role: pool.max_batch_size
                                       for role, pool in topo.active_pools()},
                       frontend_tls=plan.endpoint_tls,
                       frontend_ready=frontend.ready if frontend else None)


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
