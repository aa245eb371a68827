"""GPU memory arithmetic for one worker: weights split by TP plus the KV cache its batch needs.

Shared by the topology checks (does this worker fit?) and the planner (what is the largest
batch that fits?), so both always agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from .catalog import GpuSpec, ModelArchitecture

GIB = 1024**3

# Activations, CUDA graphs, NCCL buffers and the runtime's own allocations: TRT-LLM keeps
# roughly this much outside weights and KV cache on an 80 GB card. A fixed share plus a floor
# keeps small GPUs honest too.
RUNTIME_RESERVE_FRACTION = 0.08
RUNTIME_RESERVE_FLOOR_GIB = 2.0


def kv_bytes_per_token(arch: ModelArchitecture, kv_bytes_per_element: float) -> float:
    """K and V for every layer, for all KV heads (the whole model, before TP splits it)."""
    return 2 * arch.layers * arch.kv_heads * arch.head_dim * kv_bytes_per_element


def runtime_reserve_gib(gpu: GpuSpec) -> float:
    return max(RUNTIME_RESERVE_FLOOR_GIB, gpu.memory_gib * RUNTIME_RESERVE_FRACTION)


@dataclass(frozen=True)
class MemoryFit:
    gpu_memory_gib: float
    weights_gib: float
    kv_cache_gib: float
    reserve_gib: float
    tensor_parallel: int
    batch: int
    seq_len: int
    kv_gib_per_sequence: float
    kv_share: float
    """The share of the memory beside weights and runtime that TRT-LLM gives the KV cache
    (free_gpu_memory_fraction): the rest stays free."""

    @property
    def free_gib(self) -> float:
        return self.gpu_memory_gib - self.weights_gib - self.reserve_gib

    @property
    def kv_room_gib(self) -> float:
        return max(0.0, self.free_gib) * self.kv_share

    @property
    def fits(self) -> bool:
        return self.free_gib > 0 and self.kv_cache_gib <= self.kv_room_gib

    @property
    def max_batch(self) -> int:
        """The largest batch of full-length sequences the KV cache holds."""
        if not self.kv_gib_per_sequence:
            return 0
        return int(self.kv_room_gib / self.kv_gib_per_sequence)

    def explain(self) -> str:
        if self.free_gib <= 0:
            return (f"the weights ({self.weights_gib:.1f} GiB per GPU) and runtime "
                    f"({self.reserve_gib:.1f}) do not fit the GPU's {self.gpu_memory_gib:.0f} "
                    "GiB: raise tensor_parallel or quantize")
        short = self.kv_cache_gib - self.kv_room_gib
        head = (f"batch {self.batch} x {self.seq_len} tokens needs {self.kv_cache_gib:.1f} GiB "
                f"of KV cache per GPU but the KV cache gets {self.kv_room_gib:.1f} "
                f"({self.kv_share:g} of the {self.free_gib:.1f} GiB beside weights "
                f"{self.weights_gib:.1f} and runtime {self.reserve_gib:.1f}), {short:.1f} GiB "
                "short")
        if self.max_batch >= 1:
            return head + (f"; lower max_batch_size to {self.max_batch}, raise "
                           "free_gpu_memory_fraction or raise tensor_parallel")
        return head + "; raise tensor_parallel or quantize"


def fit_worker_memory(*, arch: ModelArchitecture, gpu: GpuSpec, weight_bytes_per_param: float,
                      kv_bytes_per_element: float, tensor_parallel: int, batch: int,
                      seq_len: int, kv_share: float) -> MemoryFit:
    weights = arch.params_billion * 1e9 * weight_bytes_per_param / tensor_parallel / GIB
    per_seq = kv_bytes_per_token(arch, kv_bytes_per_element) * seq_len / tensor_parallel / GIB
    return MemoryFit(
        gpu_memory_gib=gpu.memory_gib, weights_gib=weights, kv_cache_gib=per_seq * batch,
        reserve_gib=runtime_reserve_gib(gpu), tensor_parallel=tensor_parallel, batch=batch,
        seq_len=seq_len, kv_gib_per_sequence=per_seq, kv_share=kv_share)
