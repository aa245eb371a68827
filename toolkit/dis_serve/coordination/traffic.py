"""Per-pool traffic and the router's view, from the frontend's and workers' Prometheus text.

Names read off a running Dynamo 1.6.1 graph: the router's registered workers (with their
type) are `dynamo_component_router_worker_registered`; a KV router that follows KV events
exports `dynamo_component_router_kv_event_source_mismatch_workers` (workers it has no event
source for), and one started with `--no-router-kv-events` does not; each worker counts the
requests its handlers served in `dynamo_component_requests_total`; the frontend counts its
requests' prompt tokens in `dynamo_frontend_input_sequence_tokens` (a histogram per model,
bounds 0, 100, 210, 430, 870, 1800, ... tokens).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .dynamo_layout import WORKER_ENDPOINT
from .observed import TrafficView, WorkerTraffic

if TYPE_CHECKING:
    import httpx

FRONTEND_REQUESTS = "dynamo_frontend_requests_total"
ROUTER_REGISTERED = "dynamo_component_router_worker_registered"
KV_SOURCE_MISMATCH = "dynamo_component_router_kv_event_source_mismatch_workers"
WORKER_REQUESTS = "dynamo_component_requests_total"
KV_EVENTS_APPLIED = "dynamo_component_kv_cache_events_applied"
PROMPT_TOKENS = "dynamo_frontend_input_sequence_tokens"


def _samples(text: str) -> list:
    """Every sample of a Prometheus text page; none if it is not one."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return [s for family in text_string_to_metric_families(text) for s in family.samples]
    except ValueError:
        return []


def frontend_facts(text: str) -> dict:
    """The frontend's side: requests answered, the router's workers, KV-event following."""
    samples = _samples(text)
    by_model: dict[str, int] = {}
    for s in samples:
        if s.name == FRONTEND_REQUESTS:
            model = s.labels.get("model", "?")
            by_model[model] = by_model.get(model, 0) + int(s.value)
    router = {f"{int(s.labels['router_worker_id']):x}": s.labels.get("worker_type", "?")
              for s in samples
              if s.name == ROUTER_REGISTERED and s.value >= 1 and "router_worker_id" in s.labels}
    mismatch = [s for s in samples if s.name == KV_SOURCE_MISMATCH]
    follows = bool(mismatch) if router else None
    applied = sum(s.value for s in samples
                  if s.name in (KV_EVENTS_APPLIED, KV_EVENTS_APPLIED + "_total")
                  and s.labels.get("status") == "ok")
    return {"frontend_requests": sum(by_model.values()), "requests_by_model": by_model,
            "router_workers": router, "prompts_over": _prompts_over(samples),
            "router_follows_kv_events": follows, "kv_events_applied": int(applied),
            "kv_source_mismatch": int(sum(s.value for s in mismatch))}


def _prompts_over(samples: list) -> dict[float, int]:
    """Histogram bound -> the frontend's requests with a longer prompt, over every model."""
    total = sum(s.value for s in samples if s.name == PROMPT_TOKENS + "_count")
    at_most: dict[float, float] = {}
    for s in samples:
        if s.name == PROMPT_TOKENS + "_bucket" and s.labels.get("le") != "+Inf":
            bound = float(s.labels["le"])
            at_most[bound] = at_most.get(bound, 0) + s.value
    return {bound: int(total - n) for bound, n in sorted(at_most.items())}


def worker_traffic(text: str) -> list[WorkerTraffic]:
    return [WorkerTraffic(instance_id=s.labels.get("worker_id", "?"),
                          component=s.labels.get("dynamo_component", "?"),
                          requests=int(s.value))
            for s in _samples(text)
            if s.name == WORKER_REQUESTS and s.labels.get("dynamo_endpoint") == WORKER_ENDPOINT]


def read_traffic(client: httpx.Client, frontend_metrics: str | None,
                 worker_metrics: list[str]) -> TrafficView:
    """Scrape once; URLs that do not answer are listed, not fatal (a dead worker is a finding,
    not an error)."""
    unreachable: list[str] = []

    def scrape(url: str) -> str | None:
        import httpx

        try:
            response = client.get(url)
            response.raise_for_status()
            return response.text
        except httpx.HTTPError:
            unreachable.append(url)
            return None

    facts: dict = {}
    if frontend_metrics and (text := scrape(frontend_metrics)) is not None:
        facts = frontend_facts(text)
    workers = [w for url in worker_metrics if (text := scrape(url)) for w in worker_traffic(text)]
    return TrafficView(workers=workers, unreachable=unreachable, **facts)
