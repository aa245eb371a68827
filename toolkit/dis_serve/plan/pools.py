"""Per-worker performance curves the search combines into deployments.

A prefill worker is a server with a fixed service time per batch of prompts; a decode worker
is a set of `max_batch` slots whose step time grows with how many are busy; an aggregated
worker decodes its batch every step and adds prompts' prefill to some steps. Each curve is
built once per tensor-parallel size from the performance model, so the search itself never
calls the model.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from .perf_model import PerfModel

# The batch sizes decode and aggregated workers are sampled at (denser where step time
# bends); anything in between is interpolated.
BATCH_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256,
              288, 320, 352, 384, 416, 448, 512, 576, 640, 768, 896, 1024)
# Prefill workers batch at most this many prompt tokens per forward pass; aggregated workers
# at most this many per step.
PREFILL_TOKEN_CAP = 16384
AGG_TOKEN_CAP = 8192
PREFILL_BATCHES = (1, 2, 4, 8, 16, 32, 64)


def tensor_parallel_options(model: PerfModel, seq_len: int, gpus_per_node: int) -> list[int]:
    """TP sizes that divide the heads, fit in a node and leave room for one sequence."""
    arch = model.target.architecture
    return [tp for tp in (1, 2, 4, 8, 16)
            if tp <= gpus_per_node and arch.attention_heads % tp == 0
            and arch.kv_heads % tp == 0 and model.target.max_batch(tp, seq_len) >= 1]


def interpolate(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise-linear y(x), extended flat beyond the ends."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    i = bisect.bisect_right(xs, x)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


@dataclass(frozen=True)
class PrefillWorker:
    """A prefill worker that runs up to `batch` prompts per forward pass."""

    tp: int
    batch: int
    service_ms: float
    """One pass over a full batch."""
    single_ms: float
    """One pass over one prompt (what a lone request gets)."""
    max_num_tokens: int

    @property
    def capacity_per_s(self) -> float:
        return 1000.0 * self.batch / self.service_ms


@dataclass(frozen=True)
class DecodeCurve:
    """Mean inter-token latency of one decode worker against its concurrency."""

    tp: int
    batches: tuple[int, ...]
    itl_ms: tuple[float, ...]
    memory_batch: int
    """The most sequences its KV cache holds."""

    def itl_at(self, concurrency: float) -> float:
        return interpolate(self.batches, self.itl_ms, max(1.0, concurrency))

    def capacity_per_s(self, max_batch: int, osl: int) -> float:
        return 1000.0 * max_batch / (osl * self.itl_at(max_batch))

    def batch_options(self, itl_sla_ms: float) -> list[int]:
        """Max batch sizes worth deploying: those whose full batch still meets the ITL SLA."""
        return [b for b, itl in zip(self.batches, self.itl_ms, strict=True)
                if itl <= itl_sla_ms and b <= self.memory_batch]


@dataclass(frozen=True)
class AggWorker:
    """An aggregated worker: each step decodes its batch and may carry up to
    `prompts_per_step` prompts' prefill (TRT-LLM in-flight batching; the mocker charges such
    a step prefill + decode time, and so does the plan)."""

    tp: int
    prompts_per_step: int
    max_num_tokens: int
    prefill_step_ms: float
    """Prefill part of a step that carries `prompts_per_step` prompts."""
    single_prefill_ms: float
    """Prefill part of a step that carries one prompt."""
    decode: DecodeCurve

    def prefill_ms_per_request(self, rate_per_s: float, step_ms: float) -> float:
        """Prefill time a request adds to the steps. Prompts share a step only when they
        arrive within one step of each other: about 1 + rate * step of them do, up to the
        step's budget."""
        k = self.prompts_per_step
        riding = min(float(k), 1.0 + rate_per_s * step_ms / 1000.0)
        if k == 1:
            return self.single_prefill_ms
        step = self.single_prefill_ms + (self.prefill_step_ms - self.single_prefill_ms) * (
            riding - 1.0) / (k - 1)
        return step / riding

    def capacity_per_s(self, max_batch: int, osl: int) -> float:
        """Requests per second with `max_batch` requests always in flight and one prompt per
        step: per second, steps * decode_step + rate * prefill = 1 s, and steps * batch =
        rate * osl."""
        g = self.decode.itl_at(max_batch)
        return 1000.0 * max_batch / (osl * g + max_batch * self.single_prefill_ms)


def prefill_worker_options(model: PerfModel, tps: list[int], isl: int, max_isl: int,
                    ttft_budget_ms: float) -> list[PrefillWorker]:
    out = []
    for tp in tps:
        for batch in PREFILL_BATCHES:
            if batch > 1 and batch * isl > PREFILL_TOKEN_CAP:
                break
            if not model.kv_fits(tp, batch, max_isl):
                break
            service = model.prefill_ms(tp, batch, isl) * model.corrections.prefill
            if service > ttft_budget_ms:
                break
            single = model.prefill_ms(tp, 1, isl) * model.corrections.prefill
            out.append(PrefillWorker(tp, batch, service, single, max(batch * isl, max_isl)))
    return out


def decode_curves(model: PerfModel, tps: list[int], isl: int, osl: int, seq_len: int,
                  scale: float | None = None) -> list[DecodeCurve]:
    """ITL against batch for each TP; `scale` defaults to the model's decode correction."""
    scale = model.corrections.decode if scale is None else scale
    out = []
    for tp in tps:
        batches, itls = [], []
        for batch in _batch_grid(model, tp, seq_len):
            batches.append(batch)
            itls.append(model.decode_itl_ms(tp, batch, isl, osl) * scale)
        if batches:
            out.append(DecodeCurve(tp, tuple(batches), tuple(itls), batches[-1]))
    return out


def _batch_grid(model: PerfModel, tp: int, seq_len: int) -> list[int]:
    """BATCH_GRID up to what fits, plus the largest batch that fits (memory often ends
    between two grid points, and the last few sequences are the cheapest per GPU)."""
    grid = [b for b in BATCH_GRID if model.kv_fits(tp, b, seq_len)]
    if not grid:
        return []
    lo, hi = grid[-1], 2 * BATCH_GRID[-1]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if model.kv_fits(tp, mid, seq_len) else (lo, mid)
    return grid if lo == grid[-1] else [*grid, lo]


def agg_worker_options(model: PerfModel, tps: list[int], isl: int, osl: int, max_isl: int,
                seq_len: int) -> list[AggWorker]:
    """Aggregated workers, uncorrected (AIConfigurator applies its serving corrections to
    disaggregated workers only, and so does the plan), for each TP and per-step prompt
    budget from one prompt to `AGG_TOKEN_CAP` tokens."""
    out = []
    for curve in decode_curves(model, tps, isl, osl, seq_len, scale=1.0):
        single = model.prefill_ms(curve.tp, 1, isl)
        for prompts in PREFILL_BATCHES:
            if prompts > 1 and prompts * max_isl > max(AGG_TOKEN_CAP, 2 * max_isl):
                break
            step = single if prompts == 1 else model.prefill_ms(curve.tp, prompts, isl)
            out.append(AggWorker(curve.tp, prompts, prompts * max_isl, step, single, curve))
    return out
