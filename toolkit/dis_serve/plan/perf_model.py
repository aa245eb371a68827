"""What the planner asks of a performance model.

Two primitives answer everything disaggregated: the latency of one prefill forward pass
(`prefill_ms`) and of one decode step (`decode_step_ms`, averaged over a generation by
`decode_itl_ms`). An aggregated worker is answered whole by `agg_point`: TRT-LLM's in-flight
batching with a per-step context-token budget, as AIConfigurator's `run_agg` estimates it
(the roofline follows the same scheduling arithmetic on its own step times).

Two implementations: `AiconfiguratorModel` reads NVIDIA AIConfigurator's measured
per-operation database (the default wherever it knows the model and GPU), `RooflineModel`
is an analytic fallback with calibrated constants; `model_choice` picks one, and every plan
says which one answered.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum

from ..builtin import template_kv_share
from ..hardware.catalog import GpuSpec, ModelArchitecture
from ..hardware.sizing import fit_worker_memory, kv_bytes_per_token
from ..topology import KvCacheDtype, PoolRole, WeightDtype


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
class AggPoint:
    """An aggregated worker running `batch` requests at once, `ctx_tokens` of prompt per step:
    AIConfigurator's steady-state (closed-batch) estimate."""

    ttft_ms: float
    """A request's own prompt steps at steady state (`steady_prompt_steps`)."""
    itl_ms: float
    rate_per_s: float
    """Requests one worker completes per second at this batch."""
    prefill_share: float
    """Share of the worker's time spent in steps that carry prompt tokens."""
    fits: bool
    """Whether the batch fits the worker's memory."""


def steady_prompt_steps(isl: int, ctx_tokens: int) -> int:
    """Mixed steps a request's prompt takes to reach its first token on an aggregated worker
    that schedules `ctx_tokens` of prompt per step: its own chunks, no more. AIConfigurator's
    `run_agg` multiplies that by a queueing factor of 2 to 4 for a batch whose requests all
    arrive at once (each waits for the prompts before it); at steady state requests arrive
    as others finish, a few per step, and Dynamo's replay of the same worker shows the
    request's own steps only (70B FP8, TP2 H100, 5000/500, batch 80, closed loop: 385 ms
    replayed, 1,605 ms with the factor, one 5,000-token mixed step without it)."""
    return math.ceil(isl / ctx_tokens)


# TRT-LLM's in-flight batching (AIConfigurator's TRT-LLM backend): new requests enter the
# batch about three steps after the last prefill ends, so that many mixed steps count toward
# decode time no more than plain decode steps do.
TRTLLM_MIX_STEP_DRAIN = 3


# TensorRT-LLM's dynamic batch tuner (cpp/tensorrt_llm/executor/dynamicBatchTuner.cpp,
# DynamicBatchConfig::kDefaultBatchSizeTable), which Dynamo 1.6.1's trtllm worker turns on
# (dynamo/trtllm/workers/llm_worker.py: enable_batch_size_tuning=True) as trtllm-bench does:
# a worker whose KV cache holds fewer sequences than the first number runs at most the second,
# whatever its max_batch_size, and never more than the cache holds (GUARANTEED_NO_EVICT
# admits a request only with room for its whole sequence). Above the table it runs what the
# cache holds.
RUNTIME_BATCH_TABLE = ((144, 128), (336, 256), (672, 512), (832, 768), (1280, 1024),
                       (1664, 1536))


def runtime_batch_limit(capacity: int) -> int:
    """The most requests TensorRT-LLM's batch tuner lets run at once when the KV cache holds
    `capacity` sequences (70B FP8 on two H200s at 1000/1000 holds ~620: it runs 512)."""
    tuned = next((batch for below, batch in RUNTIME_BATCH_TABLE if capacity < below), capacity)
    return min(tuned, capacity)


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
    kv_share: float = field(default_factory=lambda: template_kv_share(PoolRole.DECODE.value))
    """The share of free GPU memory the KV cache of a worker holding sequences gets
    (free_gpu_memory_fraction; decode and aggregated templates give the same)."""

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
            tensor_parallel=tp, batch=1, seq_len=seq_len, kv_share=self.kv_share).max_batch

    def runtime_batch(self, tp: int, seq_len: int) -> int:
        """The largest batch a worker of `tp` GPUs really runs with `seq_len`-token
        sequences: what its KV cache holds, as TensorRT-LLM's batch tuner rounds it."""
        return runtime_batch_limit(self.max_batch(tp, seq_len))


class PerfModel(ABC):
    """Latency of one worker of `tp` GPUs, in milliseconds."""

    source: PerfSource
    corrections: PhaseCorrections = PhaseCorrections()

    def __init__(self, target: ModelOnGpu) -> None:
        self.target = target
        self.fallback_reason: str | None = None
        self.measured = PhaseCorrections()
        """Factors fitted from measurements (`plan --calibrate`), on every worker."""
        self.kv_transfer_scale = 1.0

    def calibrate(self, prefill: float, decode: float, kv_transfer: float = 1.0) -> None:
        """Plan with measured corrections: disaggregated workers on top of the serving
        corrections, aggregated ones on AIConfigurator's in-flight-batching estimate."""
        base = type(self).corrections
        self.corrections = PhaseCorrections(base.prefill * prefill, base.decode * decode)
        self.measured = PhaseCorrections(prefill, decode)
        self.kv_transfer_scale = kv_transfer

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

    def mixed_step_ms(self, tp: int, ctx_tokens: int, decoding: int, isl: int,
                      osl: int) -> float:
        """One step carrying `ctx_tokens` prompt tokens beside `decoding` decode requests."""
        prompts = max(1, round(ctx_tokens / isl))
        prefill = self.prefill_ms(tp, prompts, isl) * ctx_tokens / (prompts * isl)
        if decoding <= 0:
            return prefill
        return prefill + self.decode_step_ms(tp, decoding, isl + osl // 2)

    def agg_point(self, tp: int, batch: int, ctx_tokens: int, isl: int, osl: int,
                  seq_len: int) -> AggPoint:
        """An aggregated worker's estimate with the same corrections a disaggregated worker
        gets (the serving ones, times any measured): prompt steps scale with the prefill
        factor, decode steps with the decode factor. AIConfigurator applies its serving
        corrections to disaggregated workers only, but its aggregated estimate sums the
        same per-operation data (`benchmarks/aiconfigurator_at_trtllm_batch.py`: at the
        batch TensorRT-LLM itself ran, the raw estimate was above NVIDIA's measured
        throughput in 84 of 88 published cases, median 1.12; with the corrections median
        1.02, 79 within +-10%)."""
        point = self._agg_estimate(tp, batch, ctx_tokens, isl, osl, seq_len)
        f = self.corrections
        if (f.prefill, f.decode) == (1.0, 1.0):
            return point
        time_scale = point.prefill_share * f.prefill + (1 - point.prefill_share) * f.decode
        return AggPoint(ttft_ms=point.ttft_ms * f.prefill, itl_ms=point.itl_ms * f.decode,
                        rate_per_s=point.rate_per_s / time_scale,
                        prefill_share=point.prefill_share * f.prefill / time_scale,
                        fits=point.fits)

    def _agg_estimate(self, tp: int, batch: int, ctx_tokens: int, isl: int, osl: int,
                      seq_len: int) -> AggPoint:
        """AIConfigurator's `run_agg` scheduling (TRT-LLM backend) on this model's step
        times: prompts enter `ctx_tokens` at a time in mixed steps, the rest of the batch
        decodes beside them; the roofline uses it where AIConfigurator cannot answer."""
        ctx_steps = math.ceil(isl * batch / ctx_tokens)
        if batch == 1:
            mixed_decoders, mixed_steps, decode_steps, itl_mixed_steps = 0, 1, osl - 1.0, 0
        else:
            if ctx_steps >= osl:
                mixed_decoders = max(1, int(batch // (ctx_steps / osl)))
            else:
                mixed_decoders = max(1, batch - math.ceil(ctx_tokens / isl))
            mixed_steps = ctx_steps
            decode_steps = max(0.0, osl - mixed_steps)
            itl_mixed_steps = (mixed_steps if decode_steps == 0
                               else max(1, mixed_steps - TRTLLM_MIX_STEP_DRAIN))
        mixed = self.mixed_step_ms(tp, ctx_tokens, mixed_decoders, isl, osl)
        decode = self.decode_step_ms(tp, batch, isl + osl // 2) if decode_steps else 0.0
        ttft = mixed * steady_prompt_steps(isl, ctx_tokens)
        itl_steps = itl_mixed_steps + decode_steps
        itl = (mixed * itl_mixed_steps + decode * decode_steps) / itl_steps if itl_steps else 0.0
        total = mixed_steps * mixed + decode_steps * decode
        return AggPoint(ttft_ms=ttft, itl_ms=itl, rate_per_s=1000.0 * batch / total,
                        prefill_share=mixed_steps * mixed / total,
                        fits=self.kv_fits(tp, batch, seq_len))
