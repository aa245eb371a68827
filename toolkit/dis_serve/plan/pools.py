"""Per-worker performance curves the search combines into deployments.

A prefill worker is a server with a fixed service time per batch of prompts; a decode worker
is a set of `max_batch` slots whose step time grows with how many are busy; an aggregated
worker's TTFT, ITL and completions against its batch come whole from the performance model's
in-flight-batching estimate. Each curve is
built once per tensor-parallel size from the performance model, so the search itself never
calls the model.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

from .perf_model import AggPoint, PerfModel

# The batch sizes decode and aggregated workers are sampled at (denser where step time
# bends); anything in between is interpolated.
BATCH_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 192, 224, 256,
              288, 320, 352, 384, 416, 448, 512, 576, 640, 768, 896, 1024)
# Prefill workers batch at most this many prompt tokens per forward pass; aggregated workers
# at most this many per step.
PREFILL_TOKEN_CAP = 16384
AGG_TOKEN_CAP = 8192
PREFILL_BATCHES = (1, 2, 4, 8, 16, 32, 64)
# Decode slots are planned at most 90% busy; caps whose full batch is this far over the ITL
# SLA can still meet it at that load.
DECODE_CAP_ITL_SLACK = 1.1
# Aggregated workers run below their batch cap (Poisson arrivals need room); caps whose full
# batch is this far over the ITL SLA are still worth deploying.
AGG_CAP_ITL_SLACK = 1.3


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
        """Max batch sizes worth deploying: those whose full batch is still near the ITL SLA
        (slots are planned below full, so a cap whose full batch is a little slow can still
        meet it; the prediction decides)."""
        return [b for b, itl in zip(self.batches, self.itl_ms, strict=True)
                if itl <= DECODE_CAP_ITL_SLACK * itl_sla_ms and b <= self.memory_batch]


@dataclass(frozen=True)
class AggCurve:
    """An aggregated worker of `tp` GPUs that schedules up to `ctx_tokens` prompt tokens per
    step beside its decoding requests (TRT-LLM in-flight batching), sampled against the
    number of requests it holds: AIConfigurator's steady-state estimate at each batch."""

    tp: int
    ctx_tokens: int
    batches: tuple[int, ...]
    points: tuple[AggPoint, ...]
    prompts_per_step: int = 1
    """Whole prompts the per-step budget holds: how many wait for it in parallel."""

    @property
    def memory_batch(self) -> int:
        return self.batches[-1]

    def _at(self, field: str, concurrency: float) -> float:
        return interpolate(self.batches, [getattr(p, field) for p in self.points],
                           max(float(self.batches[0]), concurrency))

    def itl_at(self, concurrency: float) -> float:
        return self._at("itl_ms", concurrency)

    def ttft_at(self, concurrency: float) -> float:
        return self._at("ttft_ms", concurrency)

    def prefill_share_at(self, concurrency: float) -> float:
        return self._at("prefill_share", concurrency)

    def capacity_per_s(self, max_batch: int) -> float:
        return self._at("rate_per_s", max_batch)

    def saturated_per_s(self, max_batch: int) -> float:
        """The most requests a second the worker completes with at most `max_batch` in
        flight: the peak of its completions, which flatten (and may dip) well below the cap
        once the steps are compute-bound."""
        return max([p.rate_per_s for b, p in zip(self.batches, self.points, strict=True)
                    if b <= max_batch] + [self.capacity_per_s(max_batch)])

    def concurrency_at(self, rate_per_s: float) -> float | None:
        """Requests in flight when the worker completes `rate_per_s` (None: beyond what its
        largest batch completes)."""
        rates = [p.rate_per_s for p in self.points]
        if rate_per_s > max(rates):
            return None
        if rate_per_s <= rates[0]:
            return self.batches[0] * rate_per_s / rates[0]
        # Completions grow with the batch (where a bigger batch completes no more, it is
        # never the one the load settles at).
        xs, ys = [rates[0]], [self.batches[0]]
        for rate, batch in zip(rates[1:], self.batches[1:], strict=True):
            if rate > xs[-1]:
                xs.append(rate)
                ys.append(batch)
        return interpolate(xs, ys, rate_per_s)

    def batch_options(self, itl_sla_ms: float) -> list[int]:
        """Batch caps worth deploying: those still near the ITL SLA when full (the planned
        load keeps the batch below its cap)."""
        return [b for b, p in zip(self.batches, self.points, strict=True)
                if p.itl_ms <= AGG_CAP_ITL_SLACK * itl_sla_ms]


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
    """BATCH_GRID up to what fits and what TensorRT-LLM's batch tuner runs, plus the
    largest such batch (memory often ends between two grid points, and the last few
    sequences are the cheapest per GPU)."""
    limit = model.target.runtime_batch(tp, seq_len)
    grid = [b for b in BATCH_GRID if b <= limit and model.kv_fits(tp, b, seq_len)]
    if not grid:
        return []
    lo, hi = grid[-1], min(2 * BATCH_GRID[-1], limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if model.kv_fits(tp, mid, seq_len) else (lo, mid)
    return grid if lo == grid[-1] else [*grid, lo]


def agg_curves(model: PerfModel, tps: list[int], isl: int, osl: int,
               seq_len: int) -> list[AggCurve]:
    """Aggregated workers for each TP and per-step prompt budget: whole prompts, one up to
    `AGG_TOKEN_CAP` tokens (AIConfigurator's grid without chunked prefill), each sampled over
    the batches that fit memory and TensorRT-LLM's batch tuner runs."""
    out = []
    budgets = sorted({isl * k for k in (1, 2, 4, 8, 16, 32)
                      if isl * k <= max(AGG_TOKEN_CAP, 2 * isl)})
    for tp in tps:
        limit = model.target.runtime_batch(tp, seq_len)
        for ctx in budgets:
            prompts = ctx // isl
            batches, points = [], []
            for batch in [b for b in BATCH_GRID
                          if (b > prompts or b == 1 == prompts) and b <= limit]:
                point = model.agg_point(tp, batch, ctx, isl, osl, seq_len)
                if not point.fits:
                    break
                batches.append(batch)
                points.append(point)
            if len(batches) >= 2:
                out.append(AggCurve(tp, ctx, tuple(batches), tuple(points),
                                    max(1, ctx // isl)))
    return out
