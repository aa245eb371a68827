"""The worker pools and the settings every worker reads: KV-cache paging and transfer, the
mocker's knobs, system ports."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Port, Strict
from .enums import KvTransferBackend, PoolRole


class Pool(Strict):
    """A pool of identical workers: prefill, decode, or aggregated."""

    workers: int = Field(default=1, ge=1, le=4096,
                         description="Number of worker replicas `up` starts.")
    min_workers: int = Field(
        default=1, ge=1, le=4096,
        description="Fewest workers `scale`, `apply`, a roll and the planner leave the pool "
                    "with.")
    max_workers: int | None = Field(
        default=None, ge=1, le=4096,
        description="Most workers `scale`, `apply` and the planner may grow the pool to. The "
                    "GPUs they need must be in `hardware` (on Slurm the job holds them: "
                    "#SBATCH --nodes is hardware.nodes). Default: as many as the nodes' free "
                    "GPUs allow on one machine and on hosts; `workers` on Slurm, whose job "
                    "holds no spare GPUs unless hardware says so.")
    tensor_parallel: int = Field(default=1, ge=1, le=64, description="GPUs per worker (TP).")
    max_batch_size: int = Field(
        default=64, ge=1, le=16384, description="Most requests a worker runs at once.")
    max_num_tokens: int = Field(
        default=8192, ge=16, le=1048576,
        description="Most tokens a worker schedules in one forward pass.")
    free_gpu_memory_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="Share of free GPU memory TRT-LLM gives the KV cache, which the memory "
                    "check sizes max_batch_size against (default: the role's template in "
                    "configs/trtllm/, from NVIDIA's disagg recipe: prefill 0.75, decode and "
                    "agg 0.85).")
    gpu_ids: list[list[int]] | None = Field(
        default=None,
        description="Explicit GPUs, one list of tensor_parallel ids per worker; ids count "
                    "across nodes (node n holds n*gpus_per_node ...). Default: packed in order.")

    @model_validator(mode="after")
    def _bounds(self) -> Pool:
        if self.min_workers > self.workers:
            raise ValueError(f"min_workers {self.min_workers} is above workers "
                             f"{self.workers}, the replicas `up` starts; lower min_workers")
        if self.max_workers is not None and self.max_workers < self.workers:
            raise ValueError(f"max_workers {self.max_workers} is below workers "
                             f"{self.workers}; raise max_workers")
        if self.max_workers is not None and self.gpu_ids is not None \
                and self.max_workers > self.workers:
            raise ValueError("gpu_ids pins every worker's GPUs, so the pool cannot grow past "
                             f"workers {self.workers}; remove gpu_ids or max_workers")
        return self

    @property
    def gpus(self) -> int:
        return self.workers * self.tensor_parallel


class Pools(Strict):
    """Worker pools: `prefill` and `decode` for disagg, `agg` for agg."""

    prefill: Pool | None = Field(default=None, description="Prefill (context) workers.")
    decode: Pool | None = Field(default=None, description="Decode (generation) workers.")
    agg: Pool | None = Field(default=None, description="Aggregated workers (prefill+decode).")

    def get(self, role: PoolRole | str) -> Pool | None:
        return getattr(self, PoolRole(role).value)



class KvTransfer(Strict):
    """How prefill workers ship KV cache to decode workers (TRT-LLM cache transceiver)."""

    backend: KvTransferBackend = Field(
        default=KvTransferBackend.DEFAULT, description="DEFAULT | NIXL | UCX | MPI.")
    max_tokens_in_buffer: int | None = Field(
        default=None, gt=0,
        description="Transfer buffer in tokens; must exceed the longest input (default: "
                    "the smallest power of two above model.max_input_tokens).")


class Mocker(Strict):
    """Settings only the mocker backend reads."""

    speedup_ratio: float = Field(
        default=1.0, gt=0, description="Run the mocker's simulated clock this much faster.")
    profile_data: str | None = Field(
        default=None,
        description="Performance data (.npz or profiler results folder) the mocker times "
                    "itself with; `dis-serve plan --mock` writes one for the planned hardware.")
    num_gpu_blocks: int | None = Field(
        default=None, gt=0, description="KV blocks per worker (default: the mocker's own).")
    kv_transfer_bandwidth_gbps: float | None = Field(
        default=None, ge=0,
        description="Simulated prefill->decode KV transfer bandwidth in GB/s (0: no delay; "
                    "default: the mocker's own).")
    prefix_caching: bool = Field(
        default=True,
        description="Reuse KV blocks of repeated prompt prefixes (mocker "
                    "--enable-prefix-caching). Turn it off to time every prompt's prefill in "
                    "full: a tokenizer-only card maps most benchmark text to a few tokens, so "
                    "synthetic prompts repeat by accident.")


MAX_BLOCK_SIZE = 1024  # tokens per KV block; more than any engine pages with


class KvCache(Strict):
    """How workers page the KV cache (the router hashes blocks of the same size)."""

    block_size: int = Field(
        default=32, ge=1, le=MAX_BLOCK_SIZE,
        description="Tokens per KV block (TRT-LLM tokens_per_block, mocker --block-size).")


class Observability(Strict):
    system_port_base: Port = Field(
        default=9100,
        description="First worker system port (/health, /live, /metrics); worker i gets base+i.")
    engine_metrics: bool = Field(
        default=False,
        description="TRT-LLM iteration metrics on each worker's /metrics (--publish-metrics). "
                    "Off by default: Dynamo 1.6.1 notes a per-iteration throughput cost. "
                    "Always on when `autoscale` is set (the planner reads them).")

