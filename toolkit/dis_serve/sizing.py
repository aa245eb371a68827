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

    @property
    def needed_gib(self) -> float:
        return self.weights_gib + self.kv_cache_gib + self.reserve_gib

    @property
    def fits(self) -> bool:
        return self.needed_gib <= self.gpu_memory_gib

    @property
    def max_batch(self) -> int:
        """The largest batch of full-length sequences that fits beside the weights."""
        room = self.gpu_memory_gib - self.weights_gib - self.reserve_gib
        return max(0, int(room / self.kv_gib_per_sequence)) if self.kv_gib_per_sequence else 0

    def explain(self) -> str:
        short = self.needed_gib - self.gpu_memory_gib
        head = (f"needs {self.needed_gib:.1f} GiB per GPU (weights {self.weights_gib:.1f} + KV "
                f"cache {self.kv_cache_gib:.1f} for batch {self.batch} x {self.seq_len} tokens "
                f"+ runtime {self.reserve_gib:.1f}) but the GPU has {self.gpu_memory_gib:.0f} "
                f"GiB, {short:.1f} GiB short")
        if self.max_batch >= 1:
            return head + f"; lower max_batch_size to {self.max_batch} or raise tensor_parallel"
        return head + "; the weights alone do not fit: raise tensor_parallel or quantize"


def fit_worker_memory(*, arch: ModelArchitecture, gpu: GpuSpec, weight_bytes_per_param: float,
                      kv_bytes_per_element: float, tensor_parallel: int, batch: int,
                      seq_len: int) -> MemoryFit:
    weights = arch.params_billion * 1e9 * weight_bytes_per_param / tensor_parallel / GIB
    per_seq = kv_bytes_per_token(arch, kv_bytes_per_element) * seq_len / tensor_parallel / GIB
    return MemoryFit(
        gpu_memory_gib=gpu.memory_gib, weights_gib=weights, kv_cache_gib=per_seq * batch,
        reserve_gib=runtime_reserve_gib(gpu), tensor_parallel=tensor_parallel, batch=batch,
        seq_len=seq_len, kv_gib_per_sequence=per_seq)
