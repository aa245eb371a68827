"""One frame of `dis-serve top`: the graph's figures per pool over one window, computed from
two scrapes of the frontend's and every worker's `/metrics` (pure; scraping is in
observe/scrape.py, drawing in the CLI).

Metric names were read off a running Dynamo 1.6.1 demo graph (frontend, mocker prefill and
decode workers) and Dynamo's own catalog (`dynamo/prometheus_names.py`); none is deprecated:
the frontend's `active_requests` and `stage_requests` stand where the deprecated
`inflight_requests` / `queued_requests` were, and the engine's KV-cache gauge where its
compatibility alias was (the engines' names are their modules', engines/).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ..bench.server_metrics import (
    ACTIVE,
    ENGINE_METRICS,
    FRONTEND_ACTIVE,
    KV_USAGE,
    ROUTER_QUEUE,
    WORKER_QUEUES,
)
from ..coordination.traffic import FRONTEND_REQUESTS, ROUTER_REGISTERED, WORKER_REQUESTS
from ..security.pki_files import EndpointTls
from ..topology import PoolRole
from .prom_window import Page, increase, mean, quantile

# Frontend (dynamo_frontend_*), from the KV router inside it (dynamo_component_router_*).
TTFT = "dynamo_frontend_time_to_first_token_seconds"
ITL = "dynamo_frontend_inter_token_latency_seconds"
STAGE_REQUESTS = "dynamo_frontend_stage_requests"
OUTPUT_TOKENS = "dynamo_frontend_output_tokens_total"
INPUT_TOKENS = "dynamo_frontend_input_sequence_tokens"  # histogram: _sum is the token count
CACHED_TOKENS = "dynamo_frontend_cached_tokens"  # histogram of what workers report in usage
ACTIVE_DECODE_BLOCKS = "dynamo_frontend_worker_active_decode_blocks"
TOTAL_KV_BLOCKS = "dynamo_frontend_model_total_kv_blocks"
ROUTER_CACHED_PREFIX = "dynamo_component_router_kv_selected_cached_prefix_tokens_total"
ROUTER_KV_TRANSFER = "dynamo_component_router_kv_transfer_estimated_latency_seconds"
# Measured KV transfers, where the engine times them (TensorRT-LLM workers: engines/).
KV_TRANSFER_LATENCY = ENGINE_METRICS.kv_transfer_latency
KV_TRANSFER_SPEED = ENGINE_METRICS.kv_transfer_speed
WORKER_ENDPOINT = {"dynamo_endpoint": "generate"}
# Every family a frame reads, by who publishes it (an integration test finds each of the
# first three groups on a running demo graph; the KV-transfer ones exist only where an engine
# times its transfers).
FRONTEND_FAMILIES = (FRONTEND_REQUESTS, TTFT, ITL, FRONTEND_ACTIVE, STAGE_REQUESTS,
                     OUTPUT_TOKENS, INPUT_TOKENS, CACHED_TOKENS, ACTIVE_DECODE_BLOCKS,
                     TOTAL_KV_BLOCKS, ROUTER_CACHED_PREFIX, ROUTER_KV_TRANSFER, ROUTER_QUEUE,
                     ROUTER_REGISTERED)
DYNAMO_QUEUE, ENGINE_QUEUE = WORKER_QUEUES
WORKER_FAMILIES = (WORKER_REQUESTS, ACTIVE, DYNAMO_QUEUE)
# The engine's own gauges: the mocker's decode workers publish them, its prefill ones not.
ENGINE_FAMILIES = (KV_USAGE, ENGINE_QUEUE)
KV_TRANSFER_FAMILIES = (KV_TRANSFER_LATENCY, KV_TRANSFER_SPEED)
# Deprecated in Dynamo 1.6.1's catalog or marked a compatibility alias on the page itself.
DEPRECATED_FAMILIES = ("dynamo_frontend_inflight_requests", "dynamo_frontend_queued_requests",
                       *ENGINE_METRICS.deprecated)
# A pool this full (KV cache or batch slots) with nothing queued is near its limit.
SATURATED = 0.8


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WorkerTarget(_Frozen):
    """One worker process as the run directory records it."""

    name: str
    pool: PoolRole
    metrics_url: str | None = Field(
        description="None: its address is not known yet (its node's agent has not started).")
    ready: bool | None = Field(default=None, description="None: not known (--url).")
    restarts: int | None = None
    node: str | None = Field(default=None, description="The node it runs on (multi-node).")


class NodeTarget(_Frozen):
    """One node of a multi-node graph as its agent's files show it."""

    name: str
    started: bool = Field(description="Its agent has written its state or a heartbeat.")
    gone: bool = Field(description="Its agent is hung, dead or stopped: nothing is scraped "
                                   "there (a hung node's GET would cost a timeout a scrape).")
    problem: str | None = Field(default=None, description="Why it is gone, as `status` says.")


class GraphLayout(_Frozen):
    """What `top` scrapes and what it knows without scraping."""

    name: str
    frontend_metrics_url: str
    pools: list[PoolRole]
    workers: list[WorkerTarget] = Field(default_factory=list)
    batch_capacity: dict[PoolRole, int] = Field(
        default_factory=dict, description="max_batch_size of one worker of each pool.")
    frontend_tls: EndpointTls | None = Field(
        default=None, description="An https frontend's CA (and client certificate).")
    frontend_ready: bool | None = None
    frontend_node: str | None = None
    nodes: list[NodeTarget] = Field(default_factory=list, description="Multi-node graphs.")
    change: str | None = Field(default=None, description="The change of the running graph "
                                                         "under way, or how the last ended.")

    @property
    def gone_nodes(self) -> set[str]:
        return {n.name for n in self.nodes if n.gone}

    @property
    def urls(self) -> list[str]:
        """What a scrape fetches: every endpoint whose address is known, on no gone node."""
        gone = self.gone_nodes
        front = [] if self.frontend_node in gone else [self.frontend_metrics_url]
        return [*front, *(w.metrics_url for w in self.workers
                          if w.metrics_url is not None and w.node not in gone)]


@dataclass(frozen=True)
class GraphScrape:
    """Every endpoint's page at one moment (None: it did not answer); `at_s` is
    time.monotonic() when the scrape finished. A dataclass: pages hold thousands of samples
    that need no validation."""

    at_s: float
    pages: dict[str, Page | None]


class FrontendFigures(_Frozen):
    requests: float = Field(description="Requests finished in the window (any status).")
    errors: float = Field(description="Of them, not successful.")
    requests_per_s: float
    output_tokens_per_s: float | None
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    cached_prompt_pct: float | None = Field(
        description="Prompt tokens the workers served from their prefix cache (as each "
                    "response's usage reported them), in % of all prompt tokens.")
    active: float | None = Field(description="Requests inside the frontend now.")
    stages: dict[str, float] = Field(
        default_factory=dict, description="Requests now in each pipeline stage (stage/phase).")


class PoolFigures(_Frozen):
    pool: PoolRole
    workers_ready: int | None
    workers_total: int
    workers_scraped: int = Field(description="Workers whose /metrics answered both scrapes.")
    restarts: int | None
    requests: float | None = Field(description="Requests the pool's workers served.")
    requests_per_s: float | None
    queue: float | None = Field(description="Waiting now: router queue + workers' queues.")
    active: float | None = Field(description="Being served now by the pool's workers.")
    kv_cache_pct: float | None = Field(description="KV blocks in use, mean over workers.")
    kv_cache_from: str | None = Field(description="engine | router (the router's view).")
    kv_transfer_ms: float | None
    kv_transfer_gb_s: float | None
    kv_transfer_from: str | None = Field(description="engine | router estimate.")
    prefix_hit_pct: float | None = Field(
        description="Prompt tokens the router found cached on the worker it chose.")
    saturation: float | None = Field(
        description="The fuller of KV cache and batch slots, 0-1, where known.")


class ProcessFigures(_Frozen):
    """One process `top` scrapes (the frontend, each worker), with the node it runs on."""

    name: str
    node: str | None
    pool: str = Field(description="frontend, or the worker's pool.")
    state: str = Field(description="ready | not ready | answering (readiness not known) | "
                                   "not answering | gone (its node is) | not started (its "
                                   "node's agent has not said where it listens)")
    requests_per_s: float | None = None
    active: float | None = None
    queue: float | None = Field(default=None, description="The worker's own queues.")
    kv_cache_pct: float | None = Field(default=None, description="The engine's own gauge.")


class TopFrame(_Frozen):
    graph: str
    window_s: float
    frontend: FrontendFigures | None
    pools: list[PoolFigures]
    bottleneck: PoolRole | None
    verdict: str
    unreachable: list[str] = Field(default_factory=list)
    processes: list[ProcessFigures] = Field(default_factory=list)
    node_problems: list[str] = Field(
        default_factory=list, description="Each gone node, as `status` says it.")
    change: str | None = Field(default=None, description="As `status` says it.")


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else 1000.0 * seconds


def frontend_figures(before: Page, after: Page, window_s: float) -> FrontendFigures:
    requests = increase(before, after, FRONTEND_REQUESTS) or 0.0
    good = increase(before, after, FRONTEND_REQUESTS, {"status": "success"}) or 0.0
    tokens = increase(before, after, OUTPUT_TOKENS)
    prompt = increase(before, after, f"{INPUT_TOKENS}_sum")
    cached = increase(before, after, f"{CACHED_TOKENS}_sum")
    stages = {f"{s.labels.get('stage', '')}/{s.labels.get('phase', '')}".rstrip("/"): s.value
              for s in after.select(STAGE_REQUESTS)}
    return FrontendFigures(
        requests=requests, errors=max(0.0, requests - good), requests_per_s=requests / window_s,
        output_tokens_per_s=None if tokens is None else tokens / window_s,
        ttft_p50_ms=_ms(quantile(before, after, TTFT, 0.5)),
        ttft_p99_ms=_ms(quantile(before, after, TTFT, 0.99)),
        itl_p50_ms=_ms(quantile(before, after, ITL, 0.5)),
        itl_p99_ms=_ms(quantile(before, after, ITL, 0.99)),
        cached_prompt_pct=100.0 * cached / prompt if prompt and cached is not None else None,
        active=after.total(FRONTEND_ACTIVE), stages=stages)


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _avg(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _router_kv_pct(front: Page, pool: PoolRole) -> float | None:
    """The router's view of the pool's KV use: active blocks over the model's blocks."""
    total = front.total(TOTAL_KV_BLOCKS)
    active = front.select(ACTIVE_DECODE_BLOCKS, {"worker_type": pool.router_worker_type})
    if not total or not active:
        return None
    return 100.0 * sum(s.value for s in active) / (len(active) * total)


def _prefix_hit_pct(f_before: Page, f_after: Page, pool: PoolRole) -> float | None:
    prompt = increase(f_before, f_after, f"{INPUT_TOKENS}_sum")
    if not prompt:
        return None
    cached = _sum([increase(f_before, f_after, ROUTER_CACHED_PREFIX, {"phase": phase})
                   for phase in dict.fromkeys((pool.router_worker_type, pool.worker_type))])
    return None if cached is None else 100.0 * cached / prompt


def _kv_transfer(pairs: list[tuple[Page, Page]], f_before: Page, f_after: Page,
                 pool: PoolRole, disaggregated: bool
                 ) -> tuple[float | None, float | None, str | None]:
    latency = _avg([mean(b, a, KV_TRANSFER_LATENCY) for b, a in pairs])
    if latency is not None:
        return _ms(latency), _avg([mean(b, a, KV_TRANSFER_SPEED) for b, a in pairs]), "engine"
    if disaggregated and pool is PoolRole.DECODE:  # KV moves from prefill to decode
        estimate = mean(f_before, f_after, ROUTER_KV_TRANSFER)
        if estimate is not None:
            return _ms(estimate), None, "router estimate"
    return None, None, None


def pool_figures(pool: PoolRole, layout: GraphLayout, before: GraphScrape,
                 after: GraphScrape) -> PoolFigures:
    window_s = max(after.at_s - before.at_s, 1e-9)
    f_before = before.pages.get(layout.frontend_metrics_url) or Page()
    f_after = after.pages.get(layout.frontend_metrics_url) or Page()
    workers = [w for w in layout.workers if w.pool is pool]
    pairs = [(b, a) for w in workers
             if (b := before.pages.get(w.metrics_url)) is not None
             and (a := after.pages.get(w.metrics_url)) is not None]
    requests = _sum([increase(b, a, WORKER_REQUESTS, WORKER_ENDPOINT) for b, a in pairs])
    router_queue = f_after.total(ROUTER_QUEUE, {"worker_type": pool.router_worker_type})
    queue = _sum([router_queue, *(a.total(name) for _, a in pairs for name in WORKER_QUEUES)])
    active = _sum([a.total(ACTIVE, WORKER_ENDPOINT) for _, a in pairs])
    engine_kv = _avg([a.total(KV_USAGE) for _, a in pairs])
    kv_pct = 100.0 * engine_kv if engine_kv is not None else _router_kv_pct(f_after, pool)
    latency, speed, transfer_from = _kv_transfer(pairs, f_before, f_after, pool,
                                                 PoolRole.PREFILL in layout.pools)
    ready = [w.ready for w in workers] or [None]
    restarts = [w.restarts for w in workers] or [None]
    return PoolFigures(
        pool=pool,
        workers_ready=None if None in ready else sum(1 for r in ready if r),
        workers_total=len(workers) or _registered(f_after, pool),
        workers_scraped=len(pairs),
        restarts=None if None in restarts else sum(r or 0 for r in restarts),
        requests=requests, requests_per_s=None if requests is None else requests / window_s,
        queue=queue, active=active, kv_cache_pct=kv_pct,
        kv_cache_from=None if kv_pct is None else ("engine" if engine_kv is not None
                                                    else "router"),
        kv_transfer_ms=latency, kv_transfer_gb_s=speed, kv_transfer_from=transfer_from,
        prefix_hit_pct=_prefix_hit_pct(f_before, f_after, pool),
        saturation=_saturation(kv_pct, active, len(workers) or None,
                               layout.batch_capacity.get(pool)))


def _registered(front: Page, pool: PoolRole) -> int:
    """Workers of the pool the router knows (when the run directory is not at hand)."""
    return sum(1 for s in front.select(ROUTER_REGISTERED,
                                       {"worker_type": pool.router_worker_type}) if s.value >= 1)


def _saturation(kv_pct: float | None, active: float | None, workers: int | None,
                capacity: int | None) -> float | None:
    batch = (active / (workers * capacity)
             if active is not None and workers and capacity else None)
    known = [v for v in (None if kv_pct is None else kv_pct / 100.0, batch) if v is not None]
    return max(known) if known else None


def bottleneck(pools: list[PoolFigures], frontend: FrontendFigures | None
               ) -> tuple[PoolRole | None, str]:
    """Which pool limits the graph now, and one line saying why."""
    queued = [p for p in pools if p.queue]
    if queued:
        worst = max(queued, key=lambda p: (p.queue or 0) / max(1, p.workers_total))
        reason = f"{worst.pool.value} is the bottleneck: {worst.queue:g} requests queued"
    else:
        full = [p for p in pools if p.saturation is not None and p.saturation >= SATURATED]
        if not full:
            idle = frontend is not None and frontend.requests == 0 and not frontend.active
            return None, ("idle: no requests in the window" if idle
                          else "no bottleneck: every pool has headroom")
        worst = max(full, key=lambda p: p.saturation or 0.0)
        reason = (f"{worst.pool.value} is the bottleneck: "
                  f"{100 * (worst.saturation or 0):.0f}% full (KV cache or batch)")
    idle_others = [p.pool.value for p in pools if p is not worst and not p.active
                   and not p.queue]
    if idle_others:
        reason += f" while {', '.join(idle_others)} idles"
    return worst.pool, reason


def _process_state(layout: GraphLayout, node: str | None, url: str | None,
                   ready: bool | None, before: GraphScrape, after: GraphScrape) -> str:
    if node in layout.gone_nodes:
        return "gone"
    if url is None:
        return "not started"
    if before.pages.get(url) is None or after.pages.get(url) is None:
        return "not answering"
    return {True: "ready", False: "not ready", None: "answering"}[ready]


def _worker_row(layout: GraphLayout, worker: WorkerTarget, before: GraphScrape,
                after: GraphScrape, window_s: float) -> ProcessFigures:
    state = _process_state(layout, worker.node, worker.metrics_url, worker.ready, before,
                           after)
    row = ProcessFigures(name=worker.name, node=worker.node, pool=worker.pool.value,
                         state=state)
    b, a = before.pages.get(worker.metrics_url or ""), after.pages.get(worker.metrics_url or "")
    if state == "gone" or b is None or a is None:
        return row
    requests = increase(b, a, WORKER_REQUESTS, WORKER_ENDPOINT)
    kv = a.total(KV_USAGE)
    return row.model_copy(update={
        "requests_per_s": None if requests is None else requests / window_s,
        "active": a.total(ACTIVE, WORKER_ENDPOINT),
        "queue": _sum([a.total(name) for name in WORKER_QUEUES]),
        "kv_cache_pct": None if kv is None else 100.0 * kv})


def process_figures(layout: GraphLayout, before: GraphScrape, after: GraphScrape,
                    frontend: FrontendFigures | None) -> list[ProcessFigures]:
    """The frontend's row, then each worker's, in the layout's order."""
    window_s = max(after.at_s - before.at_s, 1e-9)
    state = _process_state(layout, layout.frontend_node, layout.frontend_metrics_url,
                           layout.frontend_ready, before, after)
    front = ProcessFigures(name="frontend", node=layout.frontend_node, pool="frontend",
                           state=state)
    if frontend is not None and state != "gone":
        front = front.model_copy(update={"requests_per_s": frontend.requests_per_s,
                                         "active": frontend.active})
    return [front, *(_worker_row(layout, w, before, after, window_s) for w in layout.workers)]


def build_frame(layout: GraphLayout, before: GraphScrape, after: GraphScrape) -> TopFrame:
    window_s = max(after.at_s - before.at_s, 1e-9)
    f_before = before.pages.get(layout.frontend_metrics_url)
    f_after = after.pages.get(layout.frontend_metrics_url)
    frontend = (frontend_figures(f_before, f_after, window_s)
                if f_before is not None and f_after is not None else None)
    pools = [pool_figures(pool, layout, before, after) for pool in layout.pools]
    neck, verdict = bottleneck(pools, frontend)
    unreachable = [url for url in layout.urls
                   if before.pages.get(url) is None or after.pages.get(url) is None]
    return TopFrame(graph=layout.name, window_s=window_s, frontend=frontend, pools=pools,
                    bottleneck=neck, verdict=verdict, unreachable=unreachable,
                    processes=process_figures(layout, before, after, frontend),
                    node_problems=[n.problem for n in layout.nodes if n.problem],
                    change=layout.change)
