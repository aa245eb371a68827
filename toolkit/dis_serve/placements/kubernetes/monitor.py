"""Topology -> PodMonitors (monitoring.coreos.com/v1) so a Prometheus Operator scrapes the
graph's frontend and workers, each series labelled with its graph, pool and pod as on the
local graph's targets (observe/prometheus_config.py), so the same dashboards read them.

What the selectors rely on, from Dynamo's own sources:
- the operator labels every pod it makes with nvidia.com/dynamo-graph-deployment-name,
  nvidia.com/dynamo-component-type and nvidia.com/metrics-enabled: "true" (the last unless the
  DGD is annotated nvidia.com/enable-metrics: "false"): KubeLabelMetricsEnabled in
  Dynamo's deploy/operator/internal/consts/consts.go;
- the frontend serves /metrics on its port named `http`, workers on `system`: the platform
  chart's own PodMonitors (deploy/helm/charts/platform/components/operator/templates/
  prometheus.yaml, formerly under deploy/cloud/helm/) and docs/kubernetes/observability/
  metrics.md select exactly these, and workers by type In (worker, decode, prefill);
- prefill and decode pods carry either their own type or `worker` with
  nvidia.com/dynamo-sub-component-type, depending on the operator's version (k8s_network).
Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...topology import Topology
from .network import GRAPH_LABEL, TYPE_LABEL, WORKER_TYPES
from .pod import labels
from .tls import client_secret, frontend_dns_names, frontend_https, frontend_secret

METRICS_LABEL = "nvidia.com/metrics-enabled"
SUB_TYPE_LABEL = "nvidia.com/dynamo-sub-component-type"
# A cluster's Prometheus scrapes many graphs: 5s keeps the dashboards' 1m rates smooth at a
# fifth of the local graph's cadence (which follows `top`'s one refresh a second).
SCRAPE_INTERVAL = "5s"
# (monitor suffix, component types, the pod template's port name)
ENDPOINTS = (("frontend", ["frontend"], "http"), ("workers", WORKER_TYPES, "system"))


def _meta(label: str) -> str:
    """The discovery meta label Prometheus gives a pod label."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def _relabelings() -> list[dict[str, Any]]:
    """graph, pool (frontend | prefill | decode | agg) and process, as the local targets."""
    return [
        {"sourceLabels": [_meta(GRAPH_LABEL)], "targetLabel": "graph"},
        {"sourceLabels": [_meta(TYPE_LABEL)], "targetLabel": "pool"},
        # Operators that label prefill and decode pods `worker` name the pool in a sub-type.
        {"sourceLabels": [_meta(SUB_TYPE_LABEL)], "regex": "(.+)", "targetLabel": "pool"},
        {"sourceLabels": ["pool"], "regex": "worker", "targetLabel": "pool",
         "replacement": "agg"},
        {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "process"},
    ]


def _https(topo: Topology) -> dict[str, Any]:
    """An HTTPS frontend is scraped by its pod address, checked against its Secret's CA
    under its Service's name, with the pods' client certificate when it asks for one."""
    if not frontend_https(topo):
        return {}
    tls: dict[str, Any] = {"ca": {"secret": {"name": frontend_secret(topo), "key": "ca.crt"}},
                           "serverName": frontend_dns_names(topo)[0]}
    if topo.security.tls.frontend_client_certs:
        tls |= {"cert": {"secret": {"name": client_secret(topo), "key": "tls.crt"}},
                "keySecret": {"name": client_secret(topo), "key": "tls.key"}}
    return {"scheme": "https", "tlsConfig": tls}


def render_pod_monitors(topo: Topology) -> list[dict[str, Any]]:
    """One PodMonitor per metrics port: the frontend's and the workers'. Each lives in the
    graph's namespace and selects only this graph's pods there."""
    monitors = []
    for suffix, types, port in ENDPOINTS:
        monitors.append({
            "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": {"name": f"{topo.name}-{suffix}", "namespace": topo.kubernetes.namespace,
                         "labels": labels(topo)},
            "spec": {
                "selector": {"matchLabels": {GRAPH_LABEL: topo.name, METRICS_LABEL: "true"},
                             "matchExpressions": [{"key": TYPE_LABEL, "operator": "In",
                                                   "values": list(types)}]},
                "podMetricsEndpoints": [{"port": port, "path": "/metrics",
                                         "interval": SCRAPE_INTERVAL,
                                         "relabelings": _relabelings(),
                                         **(_https(topo) if suffix == "frontend" else {})}],
            },
        })
    return monitors


def monitor_notes(topo: Topology) -> list[str]:
    """What must hold in the cluster for these monitors to scrape anything."""
    kube = topo.kubernetes
    allowed = ", ".join(kube.metrics_namespaces) or "none"
    return [
        "Prometheus Operator: its Prometheus must select PodMonitors in namespace "
        f"{kube.namespace} (kube-prometheus-stack: podMonitorSelectorNilUsesHelmValues=false "
        "and podMonitorNamespaceSelector={}).",
        "NetworkPolicy: workers accept scrapes only from the namespaces in "
        f"kubernetes.metrics_namespaces (now: {allowed}); add the one Prometheus runs in.",
        "Dynamo's platform chart installs cluster-wide dynamo-frontend and dynamo-worker "
        "PodMonitors when the Prometheus Operator is present; with those too every series "
        "is scraped twice (under another job): install the chart with "
        "dynamo.metrics.podMonitors.enabled=false where it has that value, or do not apply "
        "this file (its series then lack the graph, pool and process labels the dashboards "
        "group by).",
    ]
