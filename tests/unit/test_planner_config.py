"""`autoscale` -> Dynamo's planner: configs Dynamo 1.6.1's own PlannerConfig accepts, on
Kubernetes (the operator scales) and off it (`environment: virtual`: dis-serve scales)."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.kubernetes.planner import planner_component
from dis_serve.render.planner_config import planner_config
from dis_serve.topology import Topology

PLANNER_GRAPH = GRAPHS / "llama70b-h100-disagg-planner.yaml"


def _agg_with_autoscale() -> Topology:
    data = yaml.safe_load((GRAPHS / "llama70b-h100-agg.yaml").read_text())
    data["autoscale"] = {"ttft_ms": 800, "itl_ms": 40}
    data["pools"]["agg"]["min_workers"] = 4
    return Topology.model_validate(data)


def test_the_disagg_planner_config_is_one_dynamos_planner_accepts(dynamo_schemas):
    topo = load_model_file(Topology, PLANNER_GRAPH)
    config = dynamo_schemas.planner.model_validate(planner_config(topo, "kubernetes"))
    assert (config.ttft_ms, config.itl_ms) == (1000, 50)
    assert config.optimization_target == "sla"
    assert config.max_gpu_budget == 48
    assert (config.prefill_engine_num_gpu, config.decode_engine_num_gpu) == (4, 4)
    assert (config.effective_prefill_min_endpoint, config.effective_decode_min_endpoint) == (1, 2)
    assert config.enable_throughput_scaling and config.enable_load_scaling


def test_the_agg_planner_config_is_one_dynamos_planner_accepts(dynamo_schemas):
    config = dynamo_schemas.planner.model_validate(
        planner_config(_agg_with_autoscale(), "kubernetes"))
    assert config.mode == "agg"
    assert config.min_endpoint == 4
    assert config.decode_engine_num_gpu == 4


def test_the_planner_component_passes_its_config_the_way_dynamo_planner_parses_it(
        dynamo_schemas):
    topo = load_model_file(Topology, PLANNER_GRAPH)
    component = planner_component(topo)
    container = component["podTemplate"]["spec"]["containers"][0]
    assert component["type"] == "planner"
    assert container["command"] == ["python3", "-m", "dynamo.planner"]
    assert container["args"][0] == "--config"
    parsed = dynamo_schemas.planner.from_config_arg(container["args"][1])
    assert parsed.model_name == topo.model.name
    assert json.loads(container["args"][1]) == planner_config(topo, "kubernetes")


def test_autoscale_floors_beyond_the_gpu_budget_are_refused():
    data = yaml.safe_load(PLANNER_GRAPH.read_text())
    data["autoscale"]["max_gpus"] = 8
    with pytest.raises(ValueError, match=r"autoscale\.max_gpus 8 is below"):
        Topology.model_validate(data)


def test_autoscale_intervals_must_nest():
    data = yaml.safe_load(PLANNER_GRAPH.read_text())
    data["autoscale"]["load_interval_s"] = 7
    with pytest.raises(ValueError, match="must be shorter than and divide"):
        Topology.model_validate(data)


def _demo_with(autoscale: dict, **pools) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["autoscale"] = autoscale
    for role, settings in pools.items():
        data["pools"][role] |= settings
    return Topology.model_validate(data)


def test_an_empty_autoscale_section_scales_a_mocker_graph_on_load_off_kubernetes(
        dynamo_schemas):
    topo = _demo_with({}, decode={"max_workers": 4})
    config = dynamo_schemas.planner.model_validate(planner_config(topo, "virtual"))
    assert (config.environment, config.backend, config.optimization_target) == (
        "virtual", "mocker", "load")
    assert not config.enable_throughput_scaling and config.enable_load_scaling
    assert (config.decode_scale_up_kv_rate, config.decode_scale_down_kv_rate) == (50, 10)
    assert config.prefill_scale_up_queue_tokens == topo.pools.prefill.max_num_tokens
    # Off Kubernetes nothing binds every interface or a fixed port.
    assert (config.live_dashboard_port, config.control_api_port) == (0, 0)


def test_the_pools_min_workers_are_the_planners_floors(dynamo_schemas):
    topo = _demo_with({}, decode={"workers": 2, "min_workers": 2})
    config = dynamo_schemas.planner.model_validate(planner_config(topo, "virtual"))
    assert (config.effective_prefill_min_endpoint, config.effective_decode_min_endpoint) == (1, 2)


def test_the_old_per_pool_autoscale_floors_say_where_they_moved():
    with pytest.raises(ValueError, match=r"autoscale\.decode moved.*pools\.decode\.min_workers"):
        _demo_with({"decode": {"min_replicas": 2}})


def test_target_sla_needs_both_latency_targets():
    with pytest.raises(ValueError, match=r"target sla needs autoscale\.ttft_ms and itl_ms"):
        _demo_with({"target": "sla"})
    with pytest.raises(ValueError, match=r"ttft_ms is set but autoscale\.itl_ms is not"):
        _demo_with({"ttft_ms": 500})


def test_max_workers_beyond_the_hardware_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match=r"max_workers need 9 GPUs \(decode 8x1\) but the "
                                         r"placement has 8"):
        _demo_with({}, decode={"max_workers": 8})


def test_the_planners_port_is_claimed_like_every_other():
    with pytest.raises(ValueError, match=r"port 8000 is used by both frontend\.port and "
                                         r"autoscale\.system_port"):
        _demo_with({"system_port": 8000})
