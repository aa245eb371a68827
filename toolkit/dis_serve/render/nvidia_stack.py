"""What NVIDIA's stack pins, read by every target: Dynamo's version, the container image of
each engine (Kubernetes pods, Slurm's container steps) and the environment NVIDIA's recipes
give TensorRT-LLM workers on the cluster targets."""

from __future__ import annotations

from ..topology import Backend

DYNAMO_VERSION = "1.6.1"
IMAGES = {
    Backend.TRTLLM: f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{DYNAMO_VERSION}",
    # No mocker image exists; Dynamo's own mocker template runs it from the planner image.
    Backend.MOCKER: f"nvcr.io/nvidia/ai-dynamo/dynamo-planner:{DYNAMO_VERSION}",
}
# Since Dynamo 1.1 the planner has its own image (backend images lack its dependencies).
PLANNER_IMAGE = f"nvcr.io/nvidia/ai-dynamo/dynamo-planner:{DYNAMO_VERSION}"
# The environment every NVIDIA/srt-slurm H100 TensorRT-LLM recipe gives its workers
# (recipes/trtllm/h100-fp8/**.yaml, prefill_environment and decode_environment; the first
# four in all 62 of them, UCX_TLS in 16, e.g. 1k1k/stp/ctx2_gen1_dep16_batch256_eplb0_mtp0.yaml).
NVIDIA_WORKER_ENV = {
    # Programmatic dependent launch: a kernel starts while the previous one drains.
    "TRTLLM_ENABLE_PDL": "1",
    # No cyclic-GC pauses on the serving loop (dynamo.trtllm's worker reads it too) and on
    # the executor's worker processes.
    "TRTLLM_SERVER_DISABLE_GC": "1",
    "TRTLLM_WORKER_DISABLE_GC": "1",
    # NCCL may not mix CUDA-graph-captured and eager collectives on one communicator.
    "NCCL_GRAPH_MIXING_SUPPORT": "0",
    # The transports UCX may use for the KV transfer: InfiniBand RC/DC/UD, CUDA copies and
    # IPC within a node, TCP as the fallback.
    "UCX_TLS": "rc,dc,ud,cuda_copy,cuda_ipc,tcp",
}
