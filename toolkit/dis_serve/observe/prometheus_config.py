"""Prometheus and Grafana for a local graph, as files (pure): `prometheus.yml` scraping every
process's `/metrics` (each target labelled with its process and pool), and a Grafana
dashboard with its provisioning, whose panels are `dis-serve top`'s figures as PromQL over the
same metric names (observe/frame.py is their one home).

Layout, relative to the directory they are written to:

    prometheus.yml
    grafana/dashboards/dis-serve-<graph>.json
    grafana/provisioning/dashboards/dis-serve.yml
    grafana/provisioning/datasources/prometheus.yml
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from ..render.launch_plan import LaunchPlan
from ..topology import ProcessKind
from .frame import (
    ACTIVE,
    CACHED_TOKENS,
    DYNAMO_QUEUE,
    FRONTEND_ACTIVE,
    FRONTEND_REQUESTS,
    INPUT_TOKENS,
    ITL,
    KV_TRANSFER_LATENCY,
    KV_USAGE,
    ROUTER_CACHED_PREFIX,
    ROUTER_KV_TRANSFER,
    ROUTER_QUEUE,
    TTFT,
    WORKER_REQUESTS,
)

PROMETHEUS_FILE = "prometheus.yml"
DEFAULT_PROMETHEUS_PORT = 9090
# The cadence of `top`: benchmarks/top_scrape_cost.py measures what one scrape costs.
SCRAPE_INTERVAL = "1s"
RATE = "[1m]"
GENERATE = '{dynamo_endpoint="generate"}'


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str  # Grafana's unit id
    queries: tuple[tuple[str, str], ...]  # (legend, PromQL); one returning data suffices


def _quantile(q: float, histogram: str) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{RATE})))"


def _mean(histogram: str) -> str:
    return (f"sum(rate({histogram}_sum{RATE})) / sum(rate({histogram}_count{RATE}))")


PANELS: tuple[Panel, ...] = (
    Panel("Workers up", "short", (("{{pool}}", "sum by (pool) (up)"),)),
    Panel("Requests/s", "reqps", (
        ("{{pool}}", f"sum by (pool) (rate({WORKER_REQUESTS}{GENERATE}{RATE}))"),
        ("frontend", f"sum(rate({FRONTEND_REQUESTS}{RATE}))"))),
    Panel("TTFT", "s", (("p50", _quantile(0.5, TTFT)), ("p99", _quantile(0.99, TTFT)))),
    Panel("ITL", "s", (("p50", _quantile(0.5, ITL)), ("p99", _quantile(0.99, ITL)))),
    Panel("Queued requests", "short", (
        ("{{pool}} workers", f"sum by (pool) ({DYNAMO_QUEUE})"),
        ("router, {{worker_type}}", f"sum by (worker_type) ({ROUTER_QUEUE})"))),
    Panel("Active requests", "short", (
        ("{{pool}}", f"sum by (pool) ({ACTIVE}{GENERATE})"),
        ("frontend", f"sum({FRONTEND_ACTIVE})"))),
    Panel("KV cache use", "percentunit", (("{{pool}}", f"avg by (pool) ({KV_USAGE})"),)),
    Panel("KV transfer latency", "s", (
        ("measured (TensorRT-LLM)", _mean(KV_TRANSFER_LATENCY)),
        ("router estimate", _mean(ROUTER_KV_TRANSFER)))),
    Panel("Prefix-cache hits", "percentunit", (
        ("router, {{phase}}", f"sum by (phase) (rate({ROUTER_CACHED_PREFIX}{RATE})) / "
                              f"scalar(sum(rate({INPUT_TOKENS}_sum{RATE})))"),
        ("workers (usage)", f"sum(rate({CACHED_TOKENS}_sum{RATE})) / "
                            f"sum(rate({INPUT_TOKENS}_sum{RATE}))"))),
)


def host_port(url: str) -> str:
    """`host:port` of a URL."""
    return url.split("://", 1)[-1].split("/", 1)[0]


def scrape_targets(plan: LaunchPlan) -> list[dict]:
    """One static target per process serving `/metrics`: each frontend at its own port (not
    the balancer's, which would answer for whichever frontend it picked), every worker; the
    frontends first."""
    host = host_port(plan.endpoint).rsplit(":", 1)[0]
    targets = [{"targets": [host_port(frontend.base_url)],
                "labels": {"graph": plan.name, "process": frontend.name, "pool": "frontend"}}
               for frontend in plan.processes if frontend.kind is ProcessKind.FRONTEND]
    for worker in plan.processes:
        if worker.kind is not ProcessKind.WORKER or worker.role is None:
            continue
        targets.append({"targets": [f"{host}:{worker.ports['system']}"],
                        "labels": {"graph": plan.name, "process": worker.name,
                                   "pool": worker.role.value}})
    return targets


def prometheus_config(plan: LaunchPlan) -> dict:
    """One job for every process; an HTTPS frontend gets a job of its own, scraped with the
    graph's CA (and client certificate), its workers' plain system ports staying as they
    are."""
    targets = scrape_targets(plan)
    job = {"job_name": f"dis-serve-{plan.name}", "metrics_path": "/metrics"}
    tls = plan.endpoint_tls
    if tls is None:
        jobs = [{**job, "static_configs": targets}]
    else:
        tls_config = {"ca_file": tls.ca_cert} | (
            {"cert_file": tls.client_cert, "key_file": tls.client_key or tls.client_cert}
            if tls.client_cert else {})
        frontends = [t for t in targets if t["labels"]["pool"] == "frontend"]
        jobs = [{**job, "job_name": f"dis-serve-{plan.name}-frontend", "scheme": "https",
                 "tls_config": tls_config, "static_configs": frontends}]
        if workers := targets[len(frontends):]:
            jobs.append({**job, "static_configs": workers})
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "5s"},
            "scrape_configs": jobs}


def dashboard(graph: str) -> dict:
    """A Grafana dashboard (schema 39): one time-series panel per PANELS entry, two a row."""
    panels = []
    for index, panel in enumerate(PANELS):
        panels.append({
            "id": index + 1, "type": "timeseries", "title": panel.title,
            "datasource": {"type": "prometheus", "uid": "dis-serve-prometheus"},
            "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                        for i, (legend, expr) in enumerate(panel.queries)]})
    return {"title": f"dis-serve {graph}", "uid": f"dis-serve-{graph}", "schemaVersion": 39,
            "time": {"from": "now-15m", "to": "now"}, "refresh": "5s", "panels": panels,
            "tags": ["dis-serve", "dynamo"]}


def grafana_files(graph: str, prometheus_port: int = DEFAULT_PROMETHEUS_PORT,
                  dashboards_dir: str = "grafana/dashboards") -> dict[str, str]:
    """The dashboard and its provisioning, relative path -> text. `dashboards_dir` is where
    Grafana will find the dashboards (its provisioning names a directory; relative paths are
    Grafana's working directory)."""
    datasource = {"apiVersion": 1, "datasources": [{
        "name": "Prometheus", "uid": "dis-serve-prometheus", "type": "prometheus",
        "access": "proxy", "url": f"http://127.0.0.1:{prometheus_port}", "isDefault": True}]}
    provider = {"apiVersion": 1, "providers": [{
        "name": "dis-serve", "type": "file", "allowUiUpdates": False,
        "options": {"path": dashboards_dir}}]}
    return {
        f"grafana/dashboards/dis-serve-{graph}.json":
            json.dumps(dashboard(graph), indent=2) + "\n",
        "grafana/provisioning/dashboards/dis-serve.yml": yaml.safe_dump(provider,
                                                                        sort_keys=False),
        "grafana/provisioning/datasources/prometheus.yml": yaml.safe_dump(datasource,
                                                                          sort_keys=False),
    }


def render_observability(plan: LaunchPlan, prometheus_port: int = DEFAULT_PROMETHEUS_PORT,
                         dashboards_dir: str = "grafana/dashboards") -> dict[str, str]:
    """Relative path -> text: prometheus.yml with every process as a static target, and
    `grafana_files`."""
    return {PROMETHEUS_FILE: yaml.safe_dump(prometheus_config(plan), sort_keys=False),
            **grafana_files(plan.name, prometheus_port, dashboards_dir)}
