"""Prometheus for a graph across nodes (hosts and Slurm targets), as files (pure).

The nodes' addresses are known only once the graph starts (Slurm resolves them on each node;
hosts scripts may take them from the environment), so `prometheus.yml` names no address: it
reads targets with file-based discovery from `targets/*.json` beside it, one file per node,
which whoever learns that node's address writes with `node_targets_file` (Prometheus picks a
new or changed file up without a restart). Each target is labelled like the local graph's
(graph, process, pool) plus its node, so the same dashboards read them.

Layout, relative to the run directory's observability/:

    prometheus.yml
    targets/<node>.json      written when the graph starts, not by `render`
    grafana/...              as for a local graph (prometheus_config.py)
"""

from __future__ import annotations

import json

import yaml

from ..render.cluster_plan import ClusterPlan
from ..render.shell_words import resolve_runtime, runtime_names
from ..topology import ProcessKind
from .prometheus_config import (
    DEFAULT_PROMETHEUS_PORT,
    PROMETHEUS_FILE,
    SCRAPE_INTERVAL,
    grafana_files,
    host_port,
)

TARGETS_DIR = "targets"
# How often Prometheus re-reads the files besides on change (its own default is 5m).
REFRESH = "30s"


def targets_file(node_name: str) -> str:
    """Where the node's targets go, relative to the directory holding prometheus.yml."""
    return f"{TARGETS_DIR}/{node_name}.json"


def _resolved(text: str, values: dict[str, str], what: str) -> str:
    resolved = resolve_runtime(text, values)
    if missing := runtime_names([resolved]):
        raise ValueError(f"{what}: the address {', '.join(missing)} is not resolved yet; "
                         "pass its value as the node found it")
    return resolved


def node_targets(plan: ClusterPlan, node: int, values: dict[str, str]) -> list[dict]:
    """Prometheus file-SD entries for the processes of node `node` serving /metrics: each
    frontend replica at its own address (not the balancer's), each worker at its node's
    address and system port (workers bind DYN_SYSTEM_HOST to the address they advertise).

    `values` are the run-time variables as the graph found them (Slurm: NODE_ADDR_<i> from
    the `addresses` file; hosts: HEAD_ADDRESS and that node's NODE_ADDRESS); a placement
    with literal addresses needs none. ValueError when one the node needs is missing."""
    entry = plan.nodes[node]
    what = f"node {entry.name}"
    address = _resolved(entry.address, values, what)
    targets = []
    for spec in entry.processes:
        scheme = {}
        if spec.kind is ProcessKind.FRONTEND:  # each replica at its own address
            where, pool = host_port(_resolved(spec.base_url, values, what)), "frontend"
            if plan.endpoint_tls is not None:  # the job's tls_config has the graph's CA
                scheme = {"__scheme__": "https"}
        elif spec.kind is ProcessKind.WORKER and spec.role is not None:
            where, pool = f"{address}:{spec.ports['system']}", spec.role.value
        else:
            continue
        targets.append({"targets": [where],
                        "labels": {"graph": plan.name, "process": spec.name, "pool": pool,
                                   "node": entry.name} | scheme})
    return targets


def graph_targets(plan: ClusterPlan, values: dict[str, str]) -> dict[str, list[dict]]:
    """Every node's entries, by `targets_file` path, for whoever knows all addresses at once
    (Slurm's `addresses` file; placement.hosts with literal addresses)."""
    return {targets_file(node.name): node_targets(plan, node.index, values)
            for node in plan.nodes}


def dump_targets(targets: list[dict]) -> str:
    return json.dumps(targets, indent=2) + "\n"


def _tls_config(plan: ClusterPlan) -> dict:
    """An HTTPS frontend's scrape: the graph's CA (and client certificate), named relative to
    prometheus.yml in the run directory's observability/ (Prometheus resolves them there);
    the workers' plain-HTTP system ports ignore it."""
    tls = plan.endpoint_tls_with({"RUN_DIR": ".."})
    if tls is None:
        return {}
    config = {"ca_file": tls.ca_cert}
    if tls.client_cert is not None:
        config |= {"cert_file": tls.client_cert, "key_file": tls.client_key or tls.client_cert}
    return {"tls_config": config}


def cluster_prometheus_config(plan: ClusterPlan) -> dict:
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "5s"},
            "scrape_configs": [{"job_name": f"dis-serve-{plan.name}",
                                "metrics_path": "/metrics",
                                "file_sd_configs": [{"files": [f"{TARGETS_DIR}/*.json"],
                                                     "refresh_interval": REFRESH}],
                                **_tls_config(plan)}]}


def render_cluster_observability(plan: ClusterPlan,
                                 prometheus_port: int = DEFAULT_PROMETHEUS_PORT) -> dict[str, str]:
    """Relative path -> text: prometheus.yml reading `targets/*.json`, and the dashboards."""
    return {PROMETHEUS_FILE: yaml.safe_dump(cluster_prometheus_config(plan), sort_keys=False),
            **grafana_files(plan.name, prometheus_port)}
