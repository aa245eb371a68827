"""Topology -> how the frontend survives the loss of a Kubernetes node: several replicas
behind the Service the operator gives the frontend (it load-balances over the ready pods,
whose readiness probe asks that the model can be routed), never two on one node (required
pod anti-affinity on the node's host name), and a PodDisruptionBudget so that a drain or an
upgrade takes at most one away at a time.

The operator labels the frontend's pods with the graph's name and the component type
(k8s_network.py); both select by those. Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...topology import Topology
from .network import GRAPH_LABEL, TYPE_LABEL
from .pod import labels

# A graph in a cluster has nodes to spread over: two frontends unless the topology says.
DEFAULT_K8S_REPLICAS = 2
HOST_TOPOLOGY_KEY = "kubernetes.io/hostname"


def frontend_replicas(topo: Topology) -> int:
    return topo.frontend.replicas or DEFAULT_K8S_REPLICAS


def _frontend_pods(topo: Topology) -> dict[str, Any]:
    return {"matchLabels": {GRAPH_LABEL: topo.name, TYPE_LABEL: "frontend"}}


def frontend_anti_affinity(topo: Topology) -> dict[str, Any] | None:
    """No two of the graph's frontends on one node (None with one replica)."""
    if frontend_replicas(topo) < 2:
        return None
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": _frontend_pods(topo), "topologyKey": HOST_TOPOLOGY_KEY}]}}


def render_frontend_disruption_budget(topo: Topology) -> dict[str, Any] | None:
    """At most one frontend away at a time for voluntary disruptions (None with one)."""
    if frontend_replicas(topo) < 2:
        return None
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{topo.name}-frontend", "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "spec": {"maxUnavailable": 1, "selector": _frontend_pods(topo)},
    }
