"""Dynamo's mocker (`python -m dynamo.mocker`): an engine that runs anywhere, without a GPU.

It imitates TensorRT-LLM (`--engine-type trtllm`): the same flags for disaggregation, the same
KV events (so the router really routes), TensorRT-LLM's gauge names on `/metrics`, and its
timing from a simulated clock (its own model, or the planner's profile data). Its workers read
a tokenizer-only model card, no weights. It is the planner's mock graph: the planned
TensorRT-LLM graph, imitated on this machine. Pure.
"""

from __future__ import annotations

from typing import Any

from ..topology import Backend, PoolRole, Topology
from .base import Engine, EngineMetrics, TwinTiming, WorkerSite, dynamo_image
from .trtllm import TRTLLM

IMITATES = TRTLLM
ENGINE_TYPE = IMITATES.replay_backend  # its --engine-type
# No mocker image exists; Dynamo's own mocker template runs it from the planner image.
IMAGE = dynamo_image("dynamo-planner")
# Its decode workers publish the imitated engine's gauges (its prefill ones do not); it
# transfers no KV cache it could time.
METRICS = EngineMetrics(kv_usage=IMITATES.metrics.kv_usage, queue=IMITATES.metrics.queue)
# Measured on the running demo graph: 30 MiB of a worker's 112 resident are its own.
WORKER_USS_MIB = 30


def worker_args(topo: Topology, role: PoolRole, site: WorkerSite) -> list[str]:
    """`dynamo.mocker`'s flags for a worker of `role`."""
    pool = topo.pools.get(role)
    assert pool is not None
    mock = topo.mocker
    args = ["--model-path", site.model_path, "--model-name", topo.model.name]
    # The mocker takes no --namespace: its endpoint path names one. Where the platform
    # supplies the namespace (Kubernetes' operator: NAMESPACE-NAME, unknown here) the flag is
    # left out and the mocker builds the same path from DYN_NAMESPACE.
    if site.namespace is not None:
        args += ["--endpoint", f"dyn://{site.namespace}.{role.dynamo_component}.generate"]
    args += ["--engine-type", ENGINE_TYPE,
             "--disaggregation-mode", role.disaggregation_mode,
             "--max-num-seqs", str(pool.max_batch_size),
             "--max-num-batched-tokens", str(pool.max_num_tokens),
             "--max-model-len", str(topo.model.max_seq_len),
             "--block-size", str(topo.kv_cache.block_size),
             "--kv-cache-dtype", topo.model.kv_cache_dtype.engine_dtype,
             "--speedup-ratio", f"{mock.speedup_ratio:g}"]
    if mock.num_gpu_blocks is not None:
        args += ["--num-gpu-blocks-override", str(mock.num_gpu_blocks)]
    if mock.kv_transfer_bandwidth_gbps is not None and role is not PoolRole.AGG:
        args += ["--kv-transfer-bandwidth", f"{mock.kv_transfer_bandwidth_gbps:g}"]
    if mock.profile_data is not None:
        args += ["--planner-profile-data", mock.profile_data]
    if not mock.prefix_caching:
        args.append("--no-enable-prefix-caching")
    return args


def twin_settings(timing: TwinTiming) -> dict[str, Any]:
    """The topology's `mocker` section of a mock graph: the planned workers' KV blocks, the
    planner's timing data and the link speed the prediction charges for shipping KV."""
    section: dict[str, Any] = {"num_gpu_blocks": timing.num_gpu_blocks}
    if timing.profile_data is not None:
        section["profile_data"] = timing.profile_data
    if timing.kv_transfer_bandwidth_gbps is not None:
        section["kv_transfer_bandwidth_gbps"] = timing.kv_transfer_bandwidth_gbps
    return {"mocker": section}


MOCKER = Engine(
    backend=Backend.MOCKER,
    title="mocker",
    # Dynamo's mocker with its token budget registered (mocker_worker.py says why); the
    # image has only Dynamo's.
    module="dis_serve.engines.mocker_worker",
    image_module="dynamo.mocker",
    image=IMAGE,
    k8s_component_prefix="Mocker",
    worker_args=worker_args,
    needs_model_card=True,
    worker_uss_mib=WORKER_USS_MIB,
    metrics=METRICS,
    twin_settings=twin_settings,
)
