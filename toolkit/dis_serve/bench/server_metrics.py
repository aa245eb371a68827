"""The server's side of a sweep point: queue depth, active requests and KV-cache use per pool.

AIPerf already scrapes the frontend's Prometheus `/metrics` during a run (on by default) and
scrapes any further endpoint it is given, keeping time statistics of each gauge over the
profiling phase only. dis-serve hands it every worker's system port, so there is no second
scraper competing for CPU with the load generator, and the samples line up with AIPerf's own
measurement window. This module names the endpoints and folds AIPerf's
`server_metrics_export.json` into one row per pool (the seed's per-phase view).

Metric names were read off a running Dynamo 1.6.1 graph (frontend, mocker prefill/decode
workers); the mocker's prefill workers publish no engine gauges, so their KV-cache use is
reported as unknown rather than as zero.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..engines import worker_metrics
from ..errors import RunError
from ..render.metrics_endpoints import FRONTEND, MetricsEndpoint
from ..topology import PoolRole

# The engines' own gauges, by the names their modules give them (engines/).
ENGINE_METRICS = worker_metrics()
# Requests admitted by a worker's handler and not finished (Dynamo runtime, every worker).
ACTIVE = "dynamo_component_inflight_requests"
# Requests waiting in front of a worker: Dynamo's queue before the engine, then the engine's own.
WORKER_QUEUES = ("dynamo_request_queue", *filter(None, [ENGINE_METRICS.queue]))
# Requests the KV router holds back per worker type because every worker is busy.
ROUTER_QUEUE = "dynamo_frontend_router_queue_pending_requests"
KV_USAGE = ENGINE_METRICS.kv_usage  # a fraction of the worker's KV blocks
# The frontend's own gauges, as Dynamo 1.6.1's frontend exports them (read off its /metrics
# under load). `active_requests` is what the deprecated `inflight_requests` counted under a
# clearer name (the same readings, side by side). `queued_requests` (waiting for a first
# response) has no successor in 1.6.1: `stage_requests` counts requests per pipeline stage
# (preprocess, route, dispatch), which ends before the worker answers, so it reads lower.
FRONTEND_ACTIVE = "dynamo_frontend_active_requests"
FRONTEND_QUEUED = "dynamo_frontend_queued_requests"


class Gauge(BaseModel):
    """A gauge over one point: `mean` summed over the pool's workers, `peak` the highest
    reading any single worker (or queue) showed."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mean: float
    peak: float


class PoolLoad(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pool: str = Field(description="prefill | decode | agg.")
    workers: int = Field(description="Workers whose /metrics answered during the point.")
    queue_depth: Gauge | None = Field(
        description="Requests waiting for this pool: in the router, in Dynamo's worker queue "
                    "and in the engine's queue.")
    active_requests: Gauge | None = Field(description="Requests being served by the pool.")
    kv_cache_usage: Gauge | None = Field(
        description="KV-cache blocks in use, as a fraction: mean over the pool's workers; "
                    "None when the workers do not report it.")


class FrontendLoad(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    inflight: Gauge | None = Field(description="Requests inside the frontend, from its HTTP "
                                               "handler to the response's end "
                                               "(active_requests).")
    queued: Gauge | None = Field(description="Requests in the frontend still waiting for "
                                             "their first response (queued_requests).")


class ServerLoad(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    frontend: FrontendLoad | None
    pools: list[PoolLoad]
    unreachable: list[str] = Field(
        default_factory=list, description="Endpoints AIPerf could not scrape.")


def read_server_metrics(path: Path, endpoints: list[MetricsEndpoint]) -> ServerLoad | None:
    """Per-pool load from AIPerf's server metrics export; None when AIPerf wrote none."""
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a readable AIPerf server metrics export ({exc})") from None
    return summarize(data, endpoints)


def summarize(data: dict[str, Any], endpoints: list[MetricsEndpoint]) -> ServerLoad:
    metrics: dict[str, Any] = data.get("metrics") or {}
    summary = data.get("summary") or {}
    answered = set(summary.get("endpoints_successful") or [])
    pool_of = {e.url: e.pool for e in endpoints}

    def series(name: str, pool: str, where: dict[str, str] | None = None) -> list[dict]:
        found = []
        for entry in (metrics.get(name) or {}).get("series") or []:
            if pool_of.get(entry.get("endpoint_url")) != pool:
                continue
            labels = entry.get("labels") or {}
            if where and any(labels.get(k) != v for k, v in where.items()):
                continue
            found.append(entry.get("stats") or {})
        return found

    frontend = None
    if any(e.pool == FRONTEND and e.url in answered for e in endpoints):
        frontend = FrontendLoad(inflight=_total(series(FRONTEND_ACTIVE, FRONTEND)),
                                queued=_total(series(FRONTEND_QUEUED, FRONTEND)))
    pools = []
    for pool in dict.fromkeys(e.pool for e in endpoints if e.pool != FRONTEND):
        queues = [s for name in WORKER_QUEUES for s in series(name, pool)]
        queues += series(ROUTER_QUEUE, FRONTEND,
                         {"worker_type": PoolRole(pool).router_worker_type})
        pools.append(PoolLoad(
            pool=pool,
            workers=sum(1 for e in endpoints if e.pool == pool and e.url in answered),
            queue_depth=_total(queues),
            active_requests=_total(series(ACTIVE, pool, {"dynamo_endpoint": "generate"})),
            kv_cache_usage=_average(series(KV_USAGE, pool)),
        ))
    unreachable = [e.url for e in endpoints if e.url not in answered]
    return ServerLoad(frontend=frontend, pools=pools, unreachable=unreachable)


def _total(stats: list[dict]) -> Gauge | None:
    stats = [s for s in stats if "avg" in s and "max" in s]
    if not stats:
        return None
    return Gauge(mean=sum(float(s["avg"]) for s in stats),
                 peak=max(float(s["max"]) for s in stats))


def _average(stats: list[dict]) -> Gauge | None:
    stats = [s for s in stats if "avg" in s and "max" in s]
    if not stats:
        return None
    return Gauge(mean=sum(float(s["avg"]) for s in stats) / len(stats),
                 peak=max(float(s["max"]) for s in stats))
