"""Every flag we generate is parsed by Dynamo 1.6.1's own parsers, deprecation warnings included.

The frontend and mocker parsers run as shipped; `dynamo.trtllm`'s runs with the stand-in for
TensorRT-LLM's four `BuildConfig` defaults that the `trtllm_parse_args` fixture
(tests/conftest.py) gives it.
"""

from __future__ import annotations

import argparse
import sys
import warnings

import pytest

from conftest import GRAPHS
from dis_serve.engines.mocker import worker_args as mocker_args
from dis_serve.engines.trtllm import worker_args as trtllm_args
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.kubernetes.manifests import target_params as k8s_target
from dis_serve.render.cluster_plan import ClusterContext, node_target
from dis_serve.render.dynamo_argv import TargetParams, frontend_args
from dis_serve.render.shell_words import runtime
from dis_serve.render.tls_planes import node_pki
from dis_serve.topology import PoolRole, Topology

TRTLLM_GRAPHS = ["llama70b-h100-disagg.yaml", "llama70b-h100-agg.yaml", "llama8b-8gpu-disagg.yaml",
                 # --publish-metrics (autoscaled) and the graph `make gpu-check` runs.
                 "llama70b-h100-disagg-planner.yaml", "../benchmarks/gpu/qwen3-0.6b-1p1d.yaml"]
MOCKER_GRAPHS = ["demo.yaml", "agg-mocker.yaml", "demo-3node-slurm.yaml"]  # the last: HTTPS
ALL_GRAPHS = TRTLLM_GRAPHS + MOCKER_GRAPHS


def _load(name: str) -> Topology:
    return load_model_file(Topology, GRAPHS / name)


def _local(topo: Topology) -> TargetParams:
    return TargetParams.local(topo, python="python3", model_path="/models/card",
                              engine_config_dir="/cfg")


def _cluster_node(topo: Topology) -> TargetParams:
    """A worker node of the hosts and Slurm targets (Slurm's addresses are shell variables)."""
    ctx = ClusterContext(run_dir="/run", node_addresses=["10.0.0.1"])
    return node_target(topo, ctx, "/models/card", "10.0.0.1", runtime("NODE_ADDR_1"))


def _cluster_head(topo: Topology) -> TargetParams:
    """The head node of the hosts and Slurm targets: its frontend (HTTPS by default there)."""
    ctx = ClusterContext(run_dir="/run", node_addresses=["10.0.0.1"])
    return node_target(topo, ctx, "/models/card", "10.0.0.1", "10.0.0.1",
                       node_pki(topo.security, "/run", "head"))


# Every target's own parameters go through the same parsers.
TARGETS = {"local": _local, "k8s": k8s_target, "cluster-node": _cluster_node,
           "cluster-head": _cluster_head}


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", ALL_GRAPHS)
def test_frontend_argv_parses_with_dynamo_frontend_parser_without_warnings(graph, target):
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    topo = _load(graph)
    params = TARGETS[target](topo)
    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args, unknown = parser.parse_known_args(frontend_args(topo, params))
    assert unknown == []
    config = FrontendConfig.from_cli_args(args)
    config.validate()
    assert config.router_mode == topo.router.mode.value
    assert config.migration_limit == topo.frontend.migration_limit
    assert (config.http_host, config.http_port) == (params.http_host, params.http_port)
    if params.namespace is not None:
        assert config.namespace == params.namespace
    if params.frontend_tls is not None:
        assert str(config.tls_cert_path) == params.frontend_tls.cert


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", MOCKER_GRAPHS)
def test_mocker_argv_parses_with_dynamo_mocker_parser(graph, target):
    from dynamo.mocker.args import parse_args

    topo = _load(graph)
    params = TARGETS[target](topo)
    for role, pool in topo.active_pools():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            args = parse_args(mocker_args(topo, role, params))
        assert args.engine_type == "trtllm"
        assert args.disaggregation_mode == role.disaggregation_mode
        assert args.max_num_seqs == pool.max_batch_size
        assert args.max_num_batched_tokens == pool.max_num_tokens
        if params.namespace is not None:
            assert args.endpoint == f"dyn://{params.namespace}.{role.dynamo_component}.generate"


def test_a_mocker_on_kubernetes_registers_in_the_namespace_the_operator_gives_it(monkeypatch):
    """The operator names the Dynamo namespace NAMESPACE-NAME (and may add a worker suffix);
    the rendered argv names none, so the mocker builds its endpoint from DYN_NAMESPACE."""
    topo = _load("demo.yaml")
    params = TARGETS["k8s"](topo)
    monkeypatch.setenv("DYN_NAMESPACE", "llm-demo")
    monkeypatch.delitem(sys.modules, "dynamo.mocker.args", raising=False)
    from dynamo.mocker.args import parse_args

    for role, _ in topo.active_pools():
        argv = mocker_args(topo, role, params)
        assert "--endpoint" not in argv
        assert parse_args(argv).endpoint == f"dyn://llm-demo.{role.dynamo_component}.generate"


def test_a_mocker_without_prefix_caching_is_told_so_in_its_own_flag():
    from dynamo.mocker.args import parse_args

    data = _load("demo.yaml").model_dump(mode="json", exclude_unset=True)
    data["mocker"] = dict(data.get("mocker") or {}, prefix_caching=False)
    topo = Topology.model_validate(data)
    params = TARGETS["local"](topo)
    for role, _ in topo.active_pools():
        args = parse_args(mocker_args(topo, role, params))
        assert args.enable_prefix_caching is False


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("graph", TRTLLM_GRAPHS)
def test_trtllm_argv_parses_with_dynamo_trtllm_parser(graph, target, trtllm_parse_args):
    topo = _load(graph)
    params = TARGETS[target](topo)
    for role, pool in topo.active_pools():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            config = trtllm_parse_args(trtllm_args(topo, role, params))
        assert config.model == params.model_path
        assert config.served_model_name == topo.model.name
        if params.namespace is not None:
            assert config.namespace == params.namespace
        expected_mode = {"agg": "AGGREGATED"}.get(role.value, role.name)
        assert config.disaggregation_mode.name == expected_mode
        assert config.extra_engine_args == f"{params.engine_config_dir}/{role.value}.yaml"
        assert config.tensor_parallel_size == pool.tensor_parallel
        assert config.max_batch_size == pool.max_batch_size
        assert config.publish_kv_events is role.publishes_kv_events
        # Iteration metrics cost throughput: on only when asked for or autoscaled.
        assert config.publish_metrics is topo.publishes_engine_metrics


def test_prefill_workers_register_under_the_prefill_component(trtllm_parse_args):
    topo = _load("llama70b-h100-disagg.yaml")
    config = trtllm_parse_args(trtllm_args(topo, PoolRole.PREFILL, _local(topo)))
    assert config.component == "prefill"


def test_a_node_target_advertises_its_own_address_and_finds_discovery_on_the_head():
    from dis_serve.render.dynamo_argv import dynamo_env, worker_argv

    topo = _load("demo.yaml")
    node = _local(topo).model_copy(update={
        "advertise_host": "127.0.0.3", "etcd_endpoints": "http://127.0.0.2:2379",
        "nats_server": "nats://127.0.0.2:4222"})
    env = dynamo_env(topo, node)
    assert {env[k] for k in ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST",
                             "DYN_EVENT_PLANE_HOST", "DYN_SYSTEM_HOST")} == {"127.0.0.3"}
    assert (env["ETCD_ENDPOINTS"], env["NATS_SERVER"]) == ("http://127.0.0.2:2379",
                                                           "nats://127.0.0.2:4222")
    assert worker_argv(topo, PoolRole.DECODE, node) == worker_argv(topo, PoolRole.DECODE,
                                                                   _local(topo))


def test_the_operator_supplies_namespace_and_discovery_in_kubernetes():
    from dis_serve.render.dynamo_argv import dynamo_env

    topo = _load("llama70b-h100-disagg.yaml")
    params = k8s_target(topo)
    assert "--namespace" not in trtllm_args(topo, PoolRole.DECODE, params)
    assert not {"DYN_NAMESPACE", "ETCD_ENDPOINTS", "NATS_SERVER"} & set(dynamo_env(topo, params))


def test_engine_metrics_are_published_when_the_topology_asks_for_them(trtllm_parse_args):
    topo = _load("llama70b-h100-disagg.yaml")
    assert trtllm_parse_args(trtllm_args(topo, PoolRole.DECODE, _local(topo))).publish_metrics \
        is False
    asked = topo.model_copy(update={"observability": topo.observability.model_copy(
        update={"engine_metrics": True})})
    assert trtllm_parse_args(trtllm_args(asked, PoolRole.DECODE, _local(asked))).publish_metrics
