"""Every flag we generate is parsed by Dynamo 1.6.1's own parsers, deprecation warnings included.

The frontend and mocker parsers run as shipped. `dynamo.trtllm`'s parser imports TensorRT-LLM
only to read four defaults off `BuildConfig`; TensorRT-LLM needs CUDA and cannot be installed
here, so a stand-in module provides exactly those four defaults and nothing else, and the
real `dynamo.trtllm.args.parse_args` (argparse groups, validation, endpoint derivation) runs.
"""

from __future__ import annotations

import argparse
import sys
import types
import warnings

import pytest

from conftest import GRAPHS
from dis_serve.render.launch_plan import frontend_argv, mocker_argv, trtllm_argv
from dis_serve.topology import PoolRole, Topology
from dis_serve.yaml_input import load_model_file

TRTLLM_GRAPHS = ["llama70b-h100-disagg.yaml", "llama70b-h100-agg.yaml", "llama8b-8gpu-disagg.yaml",
                 # --publish-metrics (autoscaled) and the graph `make gpu-check` runs.
                 "llama70b-h100-disagg-planner.yaml", "../benchmarks/gpu/qwen3-0.6b-1p1d.yaml"]
MOCKER_GRAPHS = ["demo.yaml", "agg-mocker.yaml"]
ALL_GRAPHS = TRTLLM_GRAPHS + MOCKER_GRAPHS


def _load(name: str) -> Topology:
    return load_model_file(Topology, GRAPHS / name)


@pytest.fixture
def trtllm_parse_args(monkeypatch):
    build_config_defaults = {"max_batch_size": 2048, "max_num_tokens": 8192,
                             "max_seq_len": None, "max_beam_width": 1}

    class BuildConfig:
        model_fields = {k: types.SimpleNamespace(default=v)
                        for k, v in build_config_defaults.items()}

    package = types.ModuleType("tensorrt_llm")
    llmapi = types.ModuleType("tensorrt_llm.llmapi")
    llmapi.BuildConfig = BuildConfig
    package.llmapi = llmapi
    monkeypatch.setitem(sys.modules, "tensorrt_llm", package)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", llmapi)
    for name in [m for m in sys.modules if m.startswith("dynamo.trtllm")]:
        monkeypatch.delitem(sys.modules, name)
    from dynamo.trtllm.args import parse_args

    return parse_args


@pytest.mark.parametrize("graph", ALL_GRAPHS)
def test_frontend_argv_parses_with_dynamo_frontend_parser_without_warnings(graph):
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    topo = _load(graph)
    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args, unknown = parser.parse_known_args(frontend_argv(topo, "python3")[3:])
    assert unknown == []
    config = FrontendConfig.from_cli_args(args)
    config.validate()
    assert config.router_mode == topo.router.mode.value
    assert config.migration_limit == topo.frontend.migration_limit
    assert (config.http_host, config.http_port) == (topo.frontend.host, topo.frontend.port)
    assert config.namespace == topo.namespace


@pytest.mark.parametrize("graph", MOCKER_GRAPHS)
def test_mocker_argv_parses_with_dynamo_mocker_parser(graph):
    from dynamo.mocker.args import parse_args

    topo = _load(graph)
    for role, pool in topo.active_pools():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            args = parse_args(mocker_argv(topo, role, "python3", "/models/card")[3:])
        assert args.engine_type == "trtllm"
        assert args.disaggregation_mode == role.disaggregation_mode
        assert args.max_num_seqs == pool.max_batch_size
        assert args.max_num_batched_tokens == pool.max_num_tokens
        assert args.endpoint.startswith(f"dyn://{topo.namespace}.")


@pytest.mark.parametrize("graph", TRTLLM_GRAPHS)
def test_trtllm_argv_parses_with_dynamo_trtllm_parser(graph, trtllm_parse_args):
    topo = _load(graph)
    for role, pool in topo.active_pools():
        argv = trtllm_argv(topo, role, "python3", topo.model.id, f"/cfg/{role.value}.yaml")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            config = trtllm_parse_args(argv[3:])
        assert config.model == topo.model.id
        assert config.served_model_name == topo.model.name
        assert config.namespace == topo.namespace
        expected_mode = {"agg": "AGGREGATED"}.get(role.value, role.name)
        assert config.disaggregation_mode.name == expected_mode
        assert config.extra_engine_args == f"/cfg/{role.value}.yaml"
        assert config.tensor_parallel_size == pool.tensor_parallel
        assert config.max_batch_size == pool.max_batch_size
        assert config.publish_kv_events is role.publishes_kv_events


def test_prefill_workers_register_under_the_prefill_component(trtllm_parse_args):
    topo = _load("llama70b-h100-disagg.yaml")
    config = trtllm_parse_args(trtllm_argv(topo, PoolRole.PREFILL, "python3", "m", "c")[3:])
    assert config.component == "prefill"
