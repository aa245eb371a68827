"""TensorRT-LLM, as Dynamo 1.6.1 runs it (`python -m dynamo.trtllm`): NVIDIA's engine for the
H100 graphs.

Its workers read one engine config per pool role (the `--extra-engine-args` YAML, from a
role's template under configs/trtllm/ plus the topology's sizing), run from NVIDIA's
`tensorrtllm-runtime` image on clusters, and start their TP ranks as one MPI job through
`trtllm-llmapi-launch` where the placement starts the ranks as tasks (render/mpi_launch.py).
Pure.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ..builtin import ENGINE_TEMPLATES
from ..topology import Backend, Mode, PoolRole, Topology
from .base import Engine, EngineMetrics, PythonRequirement, WorkerSite, dynamo_image

# The image and the TensorRT-LLM it carries have their one home here. ai-dynamo 1.6.1's
# `trtllm` extra pins tensorrt-llm==1.3.0rc29 (its wheel's metadata; a test reads it), the
# version the image of the same Dynamo release carries and the engine configs are checked
# against (tests/fixtures/trtllm/: that tag's llm_args could not be read, see its README).
IMAGE = dynamo_image("tensorrtllm-runtime")
TRTLLM_VERSION = "1.3.0rc29"
TEMPLATES = "trtllm"  # configs/trtllm/<role>.yaml
# The environment every worker gets, on every target. From NVIDIA/srt-slurm's H100 recipes
# (recipes/trtllm/h100-fp8/**.yaml, prefill_environment and decode_environment): the first
# four in all 62 environment blocks of its 31 recipe files, UCX_TLS in 16 blocks (8 files,
# DeepSeek-R1 with UCX KV transfer, e.g. 1k1k/stp/ctx2_gen1_dep16_batch256_eplb0_mtp0.yaml).
WORKER_ENV = MappingProxyType({
    # Programmatic dependent launch: a kernel starts while the previous one drains.
    "TRTLLM_ENABLE_PDL": "1",
    # No cyclic-GC pauses on the serving loop (dynamo.trtllm's worker reads it too) and on
    # the executor's worker processes.
    "TRTLLM_SERVER_DISABLE_GC": "1",
    "TRTLLM_WORKER_DISABLE_GC": "1",
    # NCCL may not mix CUDA-graph-captured and eager collectives on one communicator.
    "NCCL_GRAPH_MIXING_SUPPORT": "0",
    # The transports UCX may use for the KV transfer: InfiniBand RC/DC/UD, CUDA copies and
    # IPC within a node, TCP as the fallback. (Dynamo's own sweep launcher, components/
    # backends/trtllm/performance_sweeps/scripts/start_worker.sh, unsets it instead.)
    "UCX_TLS": "rc,dc,ud,cuda_copy,cuda_ipc,tcp",
})
# Read off a running Dynamo 1.6.1 graph and its catalog (dynamo/prometheus_names.py); the
# KV-transfer pair is the catalog's trtllm_additional, timed by real TensorRT-LLM workers only.
METRICS = EngineMetrics(
    kv_usage="trtllm:kv_cache_usage_perc",  # a fraction of the worker's KV blocks
    queue="trtllm:num_requests_waiting",
    kv_transfer_latency="trtllm_kv_transfer_latency_seconds",
    kv_transfer_speed="trtllm_kv_transfer_speed_gb_s",
    deprecated=("trtllm:gpu_cache_usage_perc",),  # kv_cache_usage_perc's alias
)


def worker_args(topo: Topology, role: PoolRole, site: WorkerSite) -> list[str]:
    """`dynamo.trtllm`'s flags for a worker of `role`."""
    pool = topo.pools.get(role)
    assert pool is not None
    args = ["--model", site.model_path, "--served-model-name", topo.model.name]
    if site.namespace is not None:
        args += ["--namespace", site.namespace]
    args += ["--disaggregation-mode", role.disaggregation_mode,
             "--extra-engine-args", site.engine_config(role),
             "--tensor-parallel-size", str(pool.tensor_parallel),
             "--max-batch-size", str(pool.max_batch_size),
             "--max-num-tokens", str(pool.max_num_tokens),
             "--max-seq-len", str(topo.model.max_seq_len)]
    # The engine config carries the KV-cache share (and wins over this flag in dynamo.trtllm);
    # the flag only repeats a pool's own value for people reading the command line.
    if pool.free_gpu_memory_fraction is not None:
        args += ["--free-gpu-memory-fraction", f"{pool.free_gpu_memory_fraction:g}"]
    # Iteration metrics cost decode throughput (Dynamo 1.6.1's own words): only when asked,
    # or when Dynamo's planner needs them.
    if topo.publishes_engine_metrics:
        args.append("--publish-metrics")
    if role.publishes_kv_events and topo.router.mode.is_kv_aware:
        args.append("--publish-kv-events")
    return args


def load_template(role: PoolRole, templates: Path = ENGINE_TEMPLATES) -> dict[str, Any]:
    return yaml.safe_load((templates / TEMPLATES / f"{role.value}.yaml").read_text())


def cuda_graph_batch_sizes(max_batch_size: int) -> list[int]:
    """Powers of two up to the pool's batch limit, and the limit itself, so every batch the
    scheduler can form pads to a captured graph."""
    sizes = []
    size = 1
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    sizes.append(max_batch_size)
    return sizes


def render_engine_config(topo: Topology, role: PoolRole,
                         templates: Path = ENGINE_TEMPLATES) -> dict[str, Any]:
    """The `--extra-engine-args` YAML of a pool: the role's template under configs/trtllm/
    holds what every pool of that role shares; the topology supplies the rest."""
    pool = topo.pools.get(role)
    if pool is None:
        raise ValueError(f"topology {topo.name} has no {role.value} pool")
    # Sizing first, the role's shared settings after: the order people read these files in.
    config: dict[str, Any] = {
        "tensor_parallel_size": pool.tensor_parallel,
        "pipeline_parallel_size": 1,
        "max_batch_size": pool.max_batch_size,
        "max_num_tokens": pool.max_num_tokens,
        "max_seq_len": topo.model.max_seq_len,
    }
    config.update(copy.deepcopy(load_template(role, templates)))
    config["disable_overlap_scheduler"] = not role.overlap_scheduler
    kv = config.setdefault("kv_cache_config", {})
    kv.update({
        "dtype": topo.model.kv_cache_dtype.engine_dtype,
        "tokens_per_block": topo.kv_cache.block_size,
    })
    if pool.free_gpu_memory_fraction is not None:  # else the role template's share holds
        kv["free_gpu_memory_fraction"] = pool.free_gpu_memory_fraction
    # The role's template decides whether it captures; null (not absence) is TRT-LLM's "off".
    if config.get("cuda_graph_config") is not None:
        config["cuda_graph_config"]["batch_sizes"] = cuda_graph_batch_sizes(pool.max_batch_size)
    if topo.mode is Mode.DISAGG:
        config["cache_transceiver_config"] = {
            **config.get("cache_transceiver_config", {}),
            "backend": topo.kv_transfer.backend.value,
            "max_tokens_in_buffer": topo.kv_buffer_tokens,
        }
    else:
        config.pop("cache_transceiver_config", None)
    return config


def engine_configs(topo: Topology) -> dict[PoolRole, dict[str, Any]]:
    return {role: render_engine_config(topo, role) for role, _ in topo.active_pools()}


TRTLLM = Engine(
    backend=Backend.TRTLLM,
    title="TensorRT-LLM",
    module="dynamo.trtllm",
    image=IMAGE,
    k8s_component_prefix="TRTLLM",
    worker_args=worker_args,
    worker_env=WORKER_ENV,
    engine_configs=engine_configs,
    dgd_backend_framework="trtllm",
    runs_in_image=True,
    mpi_launcher="trtllm-llmapi-launch",
    # trtllm-llmapi-launch's export_free_tcp_addr_for_spawn_proxy_process: the first port
    # from 10012 that binds, closed again, exported as TLLM_SPAWN_PROXY_PROCESS_IPC_ADDR
    # (unconditionally: it takes no port from its caller) and bound by mgmn_leader_node.
    mpi_leader_port_from=10012,
    requires=PythonRequirement(
        module="tensorrt_llm",
        missing="backend trtllm needs TensorRT-LLM, which is not installed here; install it "
                "on an NVIDIA GPU host (pip install 'dis-serve[gpu]') or use backend: mocker"),
    distributions=("tensorrt-llm",),
    metrics=METRICS,
    aiconfigurator_backend="trtllm",
    replay_backend="trtllm",
)
