"""`autoscale` -> Dynamo's SLA planner: a config Dynamo 1.6.1's own PlannerConfig accepts."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.placements.kubernetes.planner import planner_component, planner_config
from dis_serve.topology import Topology
from dis_serve.yaml_input import load_model_file

PLANNER_GRAPH = GRAPHS / "llama70b-h100-disagg-planner.yaml"


def _agg_with_autoscale() -> Topology:
    data = yaml.safe_load((GRAPHS / "llama70b-h100-agg.yaml").read_text())
    data["autoscale"] = {"ttft_ms": 800, "itl_ms": 40, "agg": {"min_replicas": 4}}
    return Topology.model_validate(data)


def test_the_disagg_planner_config_is_one_dynamos_planner_accepts(dynamo_schemas):
    topo = load_model_file(Topology, PLANNER_GRAPH)
    config = dynamo_schemas.planner.model_validate(planner_config(topo))
    assert (config.ttft_ms, config.itl_ms) == (1000, 50)
    assert config.optimization_target == "sla"
    assert config.max_gpu_budget == 48
    assert (config.prefill_engine_num_gpu, config.decode_engine_num_gpu) == (4, 4)
    assert (config.effective_prefill_min_endpoint, config.effective_decode_min_endpoint) == (1, 2)
    assert config.enable_throughput_scaling and config.enable_load_scaling


def test_the_agg_planner_config_is_one_dynamos_planner_accepts(dynamo_schemas):
    config = dynamo_schemas.planner.model_validate(planner_config(_agg_with_autoscale()))
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
    assert json.loads(container["args"][1]) == planner_config(topo)


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
