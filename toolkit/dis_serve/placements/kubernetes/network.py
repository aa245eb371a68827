"""Topology -> who may reach the graph's pods: a NetworkPolicy around the workers, and a
Service for the frontend only when the topology asks for one beyond the cluster.

The operator labels every pod it makes with the graph's name and the component's type
(nvidia.com/dynamo-graph-deployment-name, nvidia.com/dynamo-component-type); the policy
selects by those. Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...topology import Topology
from .pod import labels

GRAPH_LABEL = "nvidia.com/dynamo-graph-deployment-name"
TYPE_LABEL = "nvidia.com/dynamo-component-type"
# The operator labels prefill and decode pods either by their own type or as `worker` with a
# sub-type, depending on its version: the policy covers all three.
WORKER_TYPES = ["worker", "prefill", "decode"]
FRONTEND_PORT = 8000


def _pods(topo: Topology, types: list[str]) -> dict[str, Any]:
    return {"matchLabels": {GRAPH_LABEL: topo.name},
            "matchExpressions": [{"key": TYPE_LABEL, "operator": "In", "values": types}]}


def render_network_policy(topo: Topology) -> dict[str, Any]:
    """Workers accept traffic from this graph's frontend (requests), planner (its
    performance queries) and workers (KV cache from prefill to decode), and from the
    namespaces listed for metrics scraping; from nothing else."""
    sources: list[dict[str, Any]] = [
        {"podSelector": _pods(topo, ["frontend", "planner", *WORKER_TYPES])}]
    sources += [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}
                for name in topo.kubernetes.metrics_namespaces]
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": f"{topo.name}-workers", "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "spec": {"podSelector": _pods(topo, WORKER_TYPES),
                 "policyTypes": ["Ingress"],
                 "ingress": [{"from": sources}]},
    }


def render_public_service(topo: Topology) -> dict[str, Any] | None:
    """The operator already gives the frontend a ClusterIP Service; a NodePort or
    LoadBalancer one exists only when `kubernetes.service` asks for it."""
    service_type = topo.kubernetes.service.service_type
    if service_type is None:
        return None
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": f"{topo.name}-public", "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "spec": {"type": service_type,
                 "selector": {GRAPH_LABEL: topo.name, TYPE_LABEL: "frontend"},
                 "ports": [{"name": "http", "port": FRONTEND_PORT,
                            "targetPort": FRONTEND_PORT}]},
    }
