"""On Kubernetes the frontend survives a node's loss as the operator's Service over several
replicas: each on its own node, at most one taken away at a time by a drain."""

from __future__ import annotations

import yaml

from conftest import GRAPHS, validate_manifest
from dis_serve.placements.kubernetes.dump import dump_manifests
from dis_serve.placements.kubernetes.manifests import render_manifests
from dis_serve.topology import Topology


def _docs(**frontend) -> list[dict]:
    data = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())
    data["frontend"] = (data.get("frontend") or {}) | frontend
    return list(yaml.safe_load_all(dump_manifests(render_manifests(Topology.model_validate(
        data)))))


def _frontend(docs: list[dict]) -> dict:
    dgd = next(d for d in docs if d["kind"] == "DynamoGraphDeployment")
    return next(c for c in dgd["spec"]["components"] if c["type"] == "frontend")


def _budget(docs: list[dict]) -> dict | None:
    return next((d for d in docs if d["kind"] == "PodDisruptionBudget"), None)


def test_a_cluster_runs_two_frontends_by_default_sharing_their_routers_state():
    frontend = _frontend(_docs())
    assert frontend["replicas"] == 2
    assert "--router-replica-sync" in frontend["podTemplate"]["spec"]["containers"][0]["args"]


def test_no_two_frontends_of_the_graph_share_a_node():
    spec = _frontend(_docs(replicas=3))["podTemplate"]["spec"]
    (rule,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert rule["topologyKey"] == "kubernetes.io/hostname"
    assert rule["labelSelector"]["matchLabels"] == {
        "nvidia.com/dynamo-graph-deployment-name": "llama70b-disagg",
        "nvidia.com/dynamo-component-type": "frontend"}


def test_a_drain_takes_at_most_one_frontend_away():
    budget = _budget(_docs())
    validate_manifest(budget)
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"][
        "nvidia.com/dynamo-component-type"] == "frontend"


def test_one_replica_asked_for_has_no_spread_and_no_budget():
    docs = _docs(replicas=1)
    assert _frontend(docs)["replicas"] == 1
    assert "affinity" not in _frontend(docs)["podTemplate"]["spec"]
    assert _budget(docs) is None
