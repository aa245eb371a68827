"""What the planner asks of a performance model.

Two primitives answer everything disaggregated: the latency of one prefill forward pass
(`prefill_ms`) and of one decode step (`decode_step_ms`, averaged over a generation by
`decode_itl_ms`); an aggregated worker's steps are built from the same two.

Two implementations: `AiconfiguratorModel` reads NVIDIA AIConfigurator's measured
per-operation database (the default wherever it knows the model and GPU), `RooflineModel`
is an analytic fallback with calibrated constants; `model_choice` picks one, and every plan
says which one answered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import StrEnum

from ..catalog import GpuSpec, ModelArchitecture
from ..sizing import fit_worker_memory, kv_bytes_per_token
from ..topology import KvCacheDtype, WeightDtype


class PerfSource(StrEnum):
    AICONFIGURATOR = "aiconfigurator"
    ROOFLINE = "roofline"


@dataclass(frozen=True)
class PhaseCorrections:
    """Multipliers on predicted prefill and decode latencies of disaggregated workers.

    AIConfigurator applies 1.1 and 1.08 (its documented defaults: measured op sums are
    slightly optimistic against a running TRT-LLM worker); the planner applies the same so
    its disaggregated numbers equal AIConfigurator's own."""

    prefill: float = 1.0
    decode: float = 1.0


# AIConfigurator's own defaults for disaggregated workers (Task.prefill_latency_correction /
# decode_latency_correction in aiconfigurator 0.12): measured op sums run a little faster
# than a serving TRT-LLM worker does.
SERVING_CORRECTIONS = PhaseCorrections(prefill=1.1, decode=1.08)


@dataclass(frozen=True)
class ModelOnGpu:
    """The model, its formats and the GPU: what every performance model is built for."""

    name: str
    aiconfigurator_name: str | None
    architecture: ModelArchitecture
    dtype: WeightDtype
    kv_cache_dtype: KvCacheDtype
    gpu_name: str
    gpu: GpuSpec

    @property
    def kv_bytes_per_token(self) -> float:
        return kv_bytes_per_token(self.architecture, self.kv_cache_dtype.bytes_per_element)

    def max_batch(self, tp: int, seq_len: int) -> int:
        """Most sequences of `seq_len` tokens one worker of `tp` GPUs holds (dis-serve's
        sizing, the same arithmetic the topology check uses)."""
        return fit_worker_memory(
            arch=self.architecture, gpu=self.gpu,
            weight_bytes_per_param=self.dtype.bytes_per_param,
            kv_bytes_per_element=self.kv_cache_dtype.bytes_per_element,
            tensor_parallel=tp, batch=1, seq_len=seq_len).max_batch


class PerfModel(ABC):
    """Latency of one worker of `tp` GPUs, in milliseconds."""

    source: PerfSource
    corrections: PhaseCorrections = PhaseCorrections()

    def __init__(self, target: ModelOnGpu) -> None:
        self.target = target
        self.fallback_reason: str | None = None

    @property
    @abstractmethod
    def detail(self) -> str:
        """One line naming the data or constants behind the numbers."""

    @abstractmethod
    def prefill_ms(self, tp: int, batch: int, isl: int) -> float:
        """One context forward pass over `batch` prompts of `isl` tokens."""

    @abstractmethod
    def decode_step_ms(self, tp: int, batch: int, context: int) -> float:
        """One decode step for `batch` sequences that each hold `context` tokens."""

    def decode_itl_ms(self, tp: int, batch: int, isl: int, osl: int) -> float:
        """Mean decode step while `batch` sequences generate from `isl` to `isl + osl`."""
        samples = max(2, min(8, osl))
        contexts = [isl + osl * (i + 0.5) / samples for i in range(samples)]
        return sum(self.decode_step_ms(tp, batch, round(c)) for c in contexts) / samples

    def kv_fits(self, tp: int, batch: int, seq_len: int) -> bool:
        """Whether `batch` sequences of `seq_len` tokens fit one worker's KV cache."""
        return batch <= self.target.max_batch(tp, seq_len)
