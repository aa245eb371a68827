"""Topology -> PodMonitors (monitoring.coreos.com/v1): how a Prometheus Operator's Prometheus,
the one Dynamo's platform is scraped by, reaches the graph's frontend and workers. They carry
the labels the platform chart's own PodMonitors give (dynamo_namespace, which Dynamo's SLA
planner filters the frontend's series by; dynamo_component_type) and the graph, pool and pod
labels of the local graph's targets (observe/prometheus_config.py), so the same dashboards
read them.

One scraper per port: the platform chart's cluster-wide PodMonitors (deploy/helm/charts/
platform/components/operator/templates/prometheus.yaml) scrape every pod labelled
nvidia.com/metrics-enabled: "true" over plain HTTP, which an HTTPS frontend refuses. The DGD
asks the operator to leave that label off (the nvidia.com/enable-metrics: "false" annotation,
KubeAnnotationEnableMetrics in Dynamo's deploy/operator/internal/consts/consts.go; read from
the DGD by older operators and from the pod template by newer ones, so both carry it), and
these monitors select the graph's pods by graph and component type instead. The graph with
the planner needs them, so they lie in k8s/ beside the DGD; other graphs find them in
k8s/monitoring/, applied where a Prometheus Operator runs (`kubectl apply -f k8s/` reads no
subdirectory).

What the selectors rely on, from Dynamo's own sources: the operator labels every pod it makes
with nvidia.com/dynamo-graph-deployment-name, nvidia.com/dynamo-component-type and
nvidia.com/dynamo-namespace; the frontend serves /metrics on its port named `http`, workers on
`system`; prefill and decode pods carry either their own type or `worker` with
nvidia.com/dynamo-sub-component-type, depending on the operator's version (k8s_network).
Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...topology import Topology
from .network import GRAPH_LABEL, TYPE_LABEL, WORKER_TYPES
from .pod import labels
from .tls import client_secret, frontend_dns_names, frontend_https, frontend_secret

METRICS_ANNOTATION = "nvidia.com/enable-metrics"
SUB_TYPE_LABEL = "nvidia.com/dynamo-sub-component-type"
DYNAMO_NAMESPACE_LABEL = "nvidia.com/dynamo-namespace"
REQUIRED_FILE = "k8s/podmonitor.yaml"
OPTIONAL_FILE = "k8s/monitoring/podmonitor.yaml"
# A cluster's Prometheus scrapes many graphs: 5s keeps the dashboards' 1m rates smooth at a
# fifth of the local graph's cadence (which follows `top`'s one refresh a second).
SCRAPE_INTERVAL = "5s"
# (monitor suffix, component types, the pod template's port name)
ENDPOINTS = (("frontend", ["frontend"], "http"), ("workers", WORKER_TYPES, "system"))


def _meta(label: str) -> str:
    """The discovery meta label Prometheus gives a pod label."""
    return "__meta_kubernetes_pod_label_" + "".join(c if c.isalnum() else "_" for c in label)


def _relabelings() -> list[dict[str, Any]]:
    """The platform's labels (dynamo_namespace, dynamo_component_type), then graph, pool
    (frontend | prefill | decode | agg) and process, as the local targets."""
    return [
        {"sourceLabels": [_meta(DYNAMO_NAMESPACE_LABEL)], "targetLabel": "dynamo_namespace"},
        {"sourceLabels": [_meta(TYPE_LABEL)], "targetLabel": "dynamo_component_type"},
        {"sourceLabels": [_meta(GRAPH_LABEL)], "targetLabel": "graph"},
        {"sourceLabels": [_meta(TYPE_LABEL)], "targetLabel": "pool"},
        # Operators that label prefill and decode pods `worker` name the pool in a sub-type.
        {"sourceLabels": [_meta(SUB_TYPE_LABEL)], "regex": "(.+)", "targetLabel": "pool"},
        {"sourceLabels": ["pool"], "regex": "worker", "targetLabel": "pool",
         "replacement": "agg"},
        {"sourceLabels": ["__meta_kubernetes_pod_name"], "targetLabel": "process"},
    ]


def pod_monitor_file(topo: Topology) -> str:
    """Where the monitors are rendered: beside the DGD when its planner reads them."""
    return REQUIRED_FILE if topo.autoscale is not None else OPTIONAL_FILE


def metrics_opt_out() -> dict[str, str]:
    """The annotation that keeps the platform's own PodMonitors off the graph's pods."""
    return {METRICS_ANNOTATION: "false"}


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
        endpoint: dict[str, Any] = {"port": port, "path": "/metrics",
                                    "interval": SCRAPE_INTERVAL, "relabelings": _relabelings()}
        if suffix == "frontend":
            # As the platform's own: labels the frontend sets itself (router metrics) stay.
            endpoint |= {"honorLabels": True, **_https(topo)}
        monitors.append({
            "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor",
            "metadata": {"name": f"{topo.name}-{suffix}", "namespace": topo.kubernetes.namespace,
                         "labels": labels(topo)},
            "spec": {
                "selector": {"matchLabels": {GRAPH_LABEL: topo.name},
                             "matchExpressions": [{"key": TYPE_LABEL, "operator": "In",
                                                   "values": list(types)}]},
                "podMetricsEndpoints": [endpoint],
            },
        })
    return monitors


def monitor_notes(topo: Topology) -> list[str]:
    """What must hold in the cluster for these monitors to scrape anything."""
    kube = topo.kubernetes
    allowed = ", ".join(kube.metrics_namespaces) or "none"
    needed = ("the SLA planner reads the frontend's series through them, so they are applied "
              "with the DGD" if topo.autoscale is not None else
              "optional: apply this directory where a Prometheus Operator runs")
    return [
        f"These monitors are the only scrapers of the graph's pods ({needed}): the DGD "
        "annotates them nvidia.com/enable-metrics: \"false\", so the cluster-wide PodMonitors "
        "of Dynamo's platform chart, which scrape over plain HTTP, leave them alone.",
        "Prometheus Operator: its Prometheus must select PodMonitors in namespace "
        f"{kube.namespace} (kube-prometheus-stack: podMonitorSelectorNilUsesHelmValues=false "
        "and podMonitorNamespaceSelector={}).",
        "NetworkPolicy: workers accept scrapes only from the namespaces in "
        f"kubernetes.metrics_namespaces (now: {allowed}); add the one Prometheus runs in.",
    ]
