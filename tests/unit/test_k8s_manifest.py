"""The Kubernetes render: a DynamoGraphDeployment Dynamo's own DGD model accepts."""

from __future__ import annotations

import sys

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.render.k8s import config_map_name, render_manifests
from dis_serve.render.output import dump_manifests
from dis_serve.topology import Topology
from dis_serve.yaml_input import load_model_file


@pytest.fixture
def dynamo_dgd_model(monkeypatch):
    """Dynamo's own pydantic model of a DGD (dynamo.profiler.utils.config.Config).

    Its module imports two constants from the planner package, whose own imports need
    `aisimulate_core`, which cannot be installed here; those two names are given stand-ins,
    and the DGD model classes themselves load as shipped.
    """
    import enum
    import types

    stubs = {
        "dynamo.planner": {},
        "dynamo.planner.config": {},
        "dynamo.planner.config.backend_components": {"WORKER_COMPONENT_NAMES": {}},
        "dynamo.planner.config.defaults": {"SubComponentType": enum.Enum("S", "PREFILL DECODE")},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.delitem(sys.modules, "dynamo.profiler.utils.config", raising=False)
    from dynamo.profiler.utils.config import Config

    return Config


def _manifests(graph: str) -> tuple[Topology, list[dict]]:
    topo = load_model_file(Topology, GRAPHS / graph)
    # Through YAML and back, as kubectl will read it.
    return topo, list(yaml.safe_load_all(dump_manifests(render_manifests(topo))))


def _components(dgd: dict) -> dict[str, dict]:
    return {c["type"]: c for c in dgd["spec"]["components"]}


@pytest.mark.parametrize("graph", ["llama70b-h100-disagg.yaml", "llama70b-h100-agg.yaml",
                                   "demo.yaml"])
def test_dgd_validates_against_dynamos_own_dgd_model(graph, dynamo_dgd_model):
    _, docs = _manifests(graph)
    dgd = docs[-1]
    parsed = dynamo_dgd_model.model_validate(dgd)
    assert next(c.component_type for c in parsed.spec.components) == "frontend"
    assert all(c.podTemplate.spec.containers[0].name == "main" for c in parsed.spec.components)
    assert parsed.apiVersion == "nvidia.com/v1beta1"
    assert parsed.kind == "DynamoGraphDeployment"


def test_disagg_components_carry_replicas_and_gpu_limits_from_the_pools():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    components = _components(docs[-1])
    assert set(components) == {"frontend", "prefill", "decode"}
    for role in ("prefill", "decode"):
        pool = topo.pools.get(role)
        container = components[role]["podTemplate"]["spec"]["containers"][0]
        assert components[role]["replicas"] == pool.workers
        assert container["resources"]["limits"]["nvidia.com/gpu"] == str(pool.tensor_parallel)
        assert container["command"] == ["python3", "-m", "dynamo.trtllm"]
        assert ["--disaggregation-mode", role] == container["args"][
            container["args"].index("--disaggregation-mode"):][:2]


def test_workers_probe_health_and_liveness_on_the_system_port():
    _, docs = _manifests("llama70b-h100-disagg.yaml")
    container = _components(docs[-1])["decode"]["podTemplate"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    port = int(env["DYN_SYSTEM_PORT"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}


def test_engine_configs_ship_as_a_config_map_the_workers_mount():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    config_map, dgd = docs
    assert config_map["kind"] == "ConfigMap"
    assert set(config_map["data"]) == {"prefill.yaml", "decode.yaml"}
    prefill = yaml.safe_load(config_map["data"]["prefill.yaml"])
    assert prefill["disable_overlap_scheduler"] is True
    spec = _components(dgd)["prefill"]["podTemplate"]["spec"]
    volume = next(v for v in spec["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == config_map_name(topo)
    args = spec["containers"][0]["args"]
    mount = spec["containers"][0]["volumeMounts"][0]["mountPath"]
    assert args[args.index("--extra-engine-args") + 1] == f"{mount}/prefill.yaml"


def test_frontend_runs_the_kv_router_with_the_topologys_migration_limit():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    args = _components(docs[-1])["frontend"]["podTemplate"]["spec"]["containers"][0]["args"]
    assert args[args.index("--router-mode") + 1] == "kv"
    assert args[args.index("--migration-limit") + 1] == str(topo.frontend.migration_limit)


def test_the_mocker_graph_needs_no_config_map_and_no_gpus():
    _, docs = _manifests("demo.yaml")
    assert [d["kind"] for d in docs] == ["DynamoGraphDeployment"]
    for component in docs[0]["spec"]["components"]:
        container = component["podTemplate"]["spec"]["containers"][0]
        assert "resources" not in container


def test_the_frontend_reads_the_router_policy_where_its_config_map_is_mounted():
    from dis_serve.render.k8s import ROUTER_POLICY_MOUNT, router_policy_map_name

    topo = load_model_file(Topology, GRAPHS / "demo.yaml")
    topo = topo.model_copy(update={"router": topo.router.model_copy(
        update={"policy_config": "/home/me/policy.yaml"})})
    frontend = _components(render_manifests(topo)[-1])["frontend"]["podTemplate"]["spec"]
    args = frontend["containers"][0]["args"]
    mounted = args[args.index("--router-policy-config") + 1]
    assert mounted.startswith(ROUTER_POLICY_MOUNT + "/")
    assert frontend["containers"][0]["volumeMounts"][0]["mountPath"] == ROUTER_POLICY_MOUNT
    assert frontend["volumes"][0]["configMap"]["name"] == router_policy_map_name(topo)
    assert "/home/me" not in " ".join(args)
