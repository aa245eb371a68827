"""The edge and the workers agree on the topology's token limits: the context window every
worker is configured with is model.max_input_tokens + model.max_output_tokens, and the token
budget each registers with the frontend (what Dynamo 1.6.1's frontend answers 400 from) is
that window. Read through Dynamo's own parsers and budget code, no processes."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.engines import engine_for
from dis_serve.engines.mocker import worker_args as mocker_args
from dis_serve.engines.mocker_worker import publish_window, with_budget
from dis_serve.engines.trtllm import worker_args as trtllm_args
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.render.dynamo_argv import TargetParams
from dis_serve.render.engine_config import render_engine_configs
from dis_serve.topology import Backend, Topology

BUDGET_KEY = "token_budget"


def _load(name: str) -> Topology:
    return load_model_file(Topology, GRAPHS / name)


def _local(topo: Topology) -> TargetParams:
    return TargetParams.local(topo, python="python3", model_path="/models/card",
                              engine_config_dir="/cfg")


def _budget(runtime_config) -> dict:
    return json.loads(runtime_config.runtime_data[BUDGET_KEY])


@pytest.mark.parametrize("graph", ["demo.yaml", "agg-mocker.yaml"])
def test_every_mocker_worker_registers_the_topologys_window_rejecting_both_overflows(graph):
    from dynamo.mocker.args import parse_args
    from dynamo.mocker.config import build_runtime_config, load_mocker_engine_args

    topo = _load(graph)
    build = with_budget(build_runtime_config, publish_window)
    for role, _pool in topo.active_pools():
        args = parse_args(mocker_args(topo, role, _local(topo)))
        _block, runtime_config = build(load_mocker_engine_args(args))
        assert runtime_config.context_length == topo.model.max_seq_len
        assert _budget(runtime_config) == {"combined_limit": topo.model.max_seq_len,
                                           "reject_prompt_overflow": True,
                                           "reject_total_overflow": True}


def test_the_mocker_runs_as_its_budget_registering_module_where_dis_serve_starts_it():
    engine = engine_for(Backend.MOCKER)
    assert engine.module == "dis_serve.engines.mocker_worker"
    assert engine.module_in_image == "dynamo.mocker"  # NVIDIA's image has no dis-serve


@pytest.mark.parametrize("graph", ["llama70b-h100-disagg.yaml", "llama70b-h100-agg.yaml"])
def test_trtllm_workers_register_the_topologys_window_as_dynamo_trtllm_publishes_it(
        graph, trtllm_parse_args):
    from dynamo.llm import ModelRuntimeConfig
    from dynamo.trtllm.utils.trtllm_utils import publish_trtllm_token_budget

    topo = _load(graph)
    configs = render_engine_configs(topo)
    for role, _pool in topo.active_pools():
        config = trtllm_parse_args(trtllm_args(topo, role, _local(topo)))
        # The flag and the engine config (which wins in dynamo.trtllm) say the same window.
        assert config.max_seq_len == configs[role]["max_seq_len"] == topo.model.max_seq_len
        runtime_config = ModelRuntimeConfig()
        publish_trtllm_token_budget(runtime_config, config.max_seq_len)
        # Dynamo's TensorRT-LLM worker leaves prompt + max_tokens beyond the window to the
        # engine (which stops at max_seq_len); docs/running.md says what a client sees.
        assert _budget(runtime_config) == {"combined_limit": topo.model.max_seq_len,
                                           "reject_prompt_overflow": True,
                                           "reject_total_overflow": False}
        assert yaml.safe_load(yaml.safe_dump(configs[role]))["max_seq_len"] == \
            config.max_seq_len
