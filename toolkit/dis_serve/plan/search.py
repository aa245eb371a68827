"""Aggregated and disaggregated deployments, searched for one of two objectives.

(a) fewest GPUs that serve a request rate under the SLA; (b) most goodput (requests per
second under the SLA) from a GPU budget. Disaggregated candidates vary the TP and batch of
each pool and the number of workers in each, freely (no fixed xPyD replica shape);
aggregated ones vary TP, batch and per-step token budget. The SLA bounds a percentile of
TTFT and of requests' mean ITL, the 90th unless the request names another (MLPerf's Server
and Interactive scenarios bound the 99th): that share of requests meets both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ..errors import UserInputError
from ..topology import Mode, Pool, PoolRole
from .perf_model import PerfModel
from .pools import (
    AggCurve,
    DecodeCurve,
    PrefillWorker,
    agg_curves,
    decode_curves,
    prefill_worker_options,
    tensor_parallel_options,
)
from .predict import (
    DEFAULT_SLA_SHARE,
    Prediction,
    kv_transfer_gbps,
    predict_agg,
    predict_disagg,
    transfer_ms,
)
from .request import Objective, PlanRequest, Workload

MAX_GPUS = 4096
# Decode batch caps tried per TP besides the largest that meets the ITL SLA: enough to trace
# the throughput-per-GPU against tokens-per-user frontier without searching every size.
DECODE_BATCH_SAMPLES = 6
BISECTION_STEPS = 22
# Objective (a) starts each pool at the fewest workers whose capacity covers the rate and
# adds workers until the SLA holds: queueing and handoff need a few more prefill workers,
# decode a few more slots, an aggregated pool a few more workers than capacity alone says.
EXTRA_PREFILL_WORKERS_TRIED = 8
EXTRA_DECODE_WORKERS_TRIED = 4
EXTRA_AGG_WORKERS_TRIED = 12
# Objective (b) bisects the rate only at the prefill/decode splits of the budget whose
# capacities balance best (goodput peaks there).
BALANCED_SPLITS_TRIED = 3


@dataclass(frozen=True)
class Sla:
    ttft_ms: float
    itl_ms: float
    share: float = DEFAULT_SLA_SHARE
    """The share of requests that must meet both (0.9: the 90th percentiles)."""

    def met_by(self, prediction: Prediction) -> bool:
        return (prediction.ttft_tail_ms <= self.ttft_ms
                and prediction.itl_tail_ms <= self.itl_ms)


@dataclass(frozen=True)
class PoolPlan:
    """One planned pool: its role and the schema's own `Pool` (what the topology gets)."""

    role: PoolRole
    spec: Pool

    @classmethod
    def of(cls, role: PoolRole, workers: int, tp: int, max_batch: int,
           max_num_tokens: int) -> PoolPlan:
        return cls(role, Pool(workers=workers, tensor_parallel=tp, max_batch_size=max_batch,
                              max_num_tokens=max_num_tokens))

    @property
    def workers(self) -> int:
        return self.spec.workers

    @property
    def tp(self) -> int:
        return self.spec.tensor_parallel

    @property
    def max_batch(self) -> int:
        return self.spec.max_batch_size

    @property
    def max_num_tokens(self) -> int:
        return self.spec.max_num_tokens

    @property
    def gpus(self) -> int:
        return self.spec.gpus


@dataclass(frozen=True)
class Candidate:
    """One deployment at the rate it is planned for, with what the model predicts there."""

    mode: Mode
    pools: tuple[PoolPlan, ...]
    prediction: Prediction
    osl: int
    shape: tuple = field(default=(), compare=False, repr=False)
    """The worker curves it was built from, to evaluate it again at another rate."""

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pools)

    @property
    def rate(self) -> float:
        return self.prediction.rate_per_s

    @property
    def tokens_per_s(self) -> float:
        return self.rate * self.osl

    @property
    def tokens_per_s_per_gpu(self) -> float:
        return self.tokens_per_s / self.gpus

    @property
    def tokens_per_s_per_user(self) -> float:
        return 1000.0 / self.prediction.itl_ms

    def pool(self, role: PoolRole) -> PoolPlan:
        return next(p for p in self.pools if p.role is role)

    @property
    def label(self) -> str:
        return " + ".join(f"{p.role.value} {p.workers}x TP{p.tp} (batch {p.max_batch})"
                          for p in self.pools)

    @property
    def limit(self) -> str:
        """The resource that runs out first as the rate grows."""
        pred = self.prediction
        if self.mode is Mode.AGG:
            return "batch slots"
        return "prefill" if pred.prefill_utilization >= pred.slot_utilization else "decode"


@dataclass
class SearchSpace:
    """Every worker shape worth deploying, with its performance curve."""

    model: PerfModel
    workload: Workload
    sla: Sla
    gpus_per_node: int
    prefill: list[PrefillWorker]
    decode: list[DecodeCurve]
    agg: list[AggCurve]
    tps: list[int] = field(default_factory=list)

    @property
    def seq_len(self) -> int:
        return self.workload.max_isl + self.workload.max_osl

    def transfer_ms(self, tp_prefill: int, tp_decode: int, total_gpus: int) -> float:
        gbps = kv_transfer_gbps(tp_prefill, tp_decode, total_gpus > self.gpus_per_node)
        return transfer_ms(self.model.target, self.workload.isl, gbps) * (
            self.model.kv_transfer_scale)

    def decode_batches(self, curve: DecodeCurve) -> list[int]:
        """Batch caps whose full batch meets the ITL SLA, sampled."""
        return _sampled(curve.batch_options(self.sla.itl_ms))

    def agg_options(self) -> Iterator[tuple[AggCurve, int]]:
        for curve in self.agg:
            for batch in _sampled(curve.batch_options(self.sla.itl_ms)):
                yield curve, batch


def build_space(model: PerfModel, request: PlanRequest, workload: Workload) -> SearchSpace:
    """Curves for every TP that fits, or a one-line error saying what would fit."""
    sla = Sla(request.ttft_ms, request.itl_ms, request.sla_share)
    seq_len = workload.max_isl + workload.max_osl
    target = model.target
    tps = tensor_parallel_options(model, seq_len, request.gpus_per_node)
    if request.tp is not None:
        if request.tp not in tps:
            raise UserInputError(
                f"TP{request.tp} is not an option for {target.name} in {target.dtype.value} "
                f"on {target.gpu_name} with {seq_len}-token sequences (the sizes that are: "
                + (", ".join(f"TP{t}" for t in tps) or "none") + ")", key="tp",
                fix="use one of them, or drop `tp`")
        tps = [request.tp]
    if not tps:
        widest = max(t for t in (1, 2, 4, 8, 16) if t <= request.gpus_per_node)
        raise UserInputError(
            f"{target.name} in {target.dtype.value} does not fit a {target.gpu_name} worker "
            f"even at TP{widest} with one {seq_len}-token sequence",
            key="model", fix="use `dtype` fp8 or awq, a GPU with more memory, or shorter "
                               "sequences")
    decode = decode_curves(model, tps, workload.isl, workload.osl, seq_len)
    fastest_itl = min((c.itl_ms[0], c.tp) for c in decode)
    if fastest_itl[0] > sla.itl_ms:
        raise UserInputError(
            f"ITL {sla.itl_ms:g} ms is impossible: the fastest decode step of {target.name} "
            f"on {target.gpu_name} is {fastest_itl[0]:.1f} ms (TP{fastest_itl[1]}, batch 1)",
            key="itl_ms", fix=f"use `itl_ms` {math.ceil(fastest_itl[0])} or more")
    prefill = prefill_worker_options(model, tps, workload.isl, workload.max_isl, sla.ttft_ms)
    if not prefill:
        tp = max(tps)
        quickest = model.prefill_ms(tp, 1, workload.isl) * model.corrections.prefill
        floor = quickest + fastest_itl[0]
        raise UserInputError(
            f"TTFT {sla.ttft_ms:g} ms is impossible: one {workload.isl}-token prefill of "
            f"{target.name} on {target.gpu_name} takes {quickest:.0f} ms at TP{tp}, "
            f"{floor:.0f} ms with the first decode step", key="ttft_ms",
            fix=f"use `ttft_ms` {math.ceil(floor * 1.1)} or more")
    agg = agg_curves(model, tps, workload.isl, workload.osl, seq_len)
    return SearchSpace(model, workload, sla, request.gpus_per_node, prefill, decode, agg, tps)


def _sampled(options: list[int]) -> list[int]:
    """At most DECODE_BATCH_SAMPLES of `options`, spread evenly, the largest always kept."""
    if len(options) <= DECODE_BATCH_SAMPLES:
        return options
    step = (len(options) - 1) / (DECODE_BATCH_SAMPLES - 1)
    return sorted({options[round(i * step)] for i in range(DECODE_BATCH_SAMPLES)})


# --- evaluation ------------------------------------------------------------------------------

def _disagg(space: SearchSpace, p: PrefillWorker, prefill_workers: int, d: DecodeCurve,
            batch: int, decode_workers: int, rate: float) -> Candidate | None:
    gpus = prefill_workers * p.tp + decode_workers * d.tp
    pred = predict_disagg(p, prefill_workers, d, batch, decode_workers, rate,
                          osl=space.workload.osl,
                          kv_transfer_ms=space.transfer_ms(p.tp, d.tp, gpus),
                          closed_loop=space.workload.closed_loop, sla_share=space.sla.share)
    if pred is None or not space.sla.met_by(pred):
        return None
    pools = (PoolPlan.of(PoolRole.PREFILL, prefill_workers, p.tp, p.batch, p.max_num_tokens),
             PoolPlan.of(PoolRole.DECODE, decode_workers, d.tp, batch,
                         max(batch, space.seq_len)))
    return Candidate(Mode.DISAGG, pools, pred, space.workload.osl, (p, d))


def _agg(space: SearchSpace, curve: AggCurve, batch: int, workers: int,
         rate: float) -> Candidate | None:
    pred = predict_agg(curve, workers, batch, rate, closed_loop=space.workload.closed_loop,
                       sla_share=space.sla.share)
    if pred is None or not space.sla.met_by(pred):
        return None
    # The step budget holds the prompts plus one token for every request decoding beside
    # them, so a prompt is never split across steps.
    tokens = max(curve.ctx_tokens, space.workload.max_isl) + batch
    pools = (PoolPlan.of(PoolRole.AGG, workers, curve.tp, batch, tokens),)
    return Candidate(Mode.AGG, pools, pred, space.workload.osl, (curve,))


def _max_rate(evaluate, capacity: float) -> Candidate | None:
    """The highest rate `evaluate` still accepts (it is monotone: more load, more wait)."""
    lo, hi, best = 0.0, capacity, None
    for _ in range(BISECTION_STEPS):
        mid = (lo + hi) / 2
        found = evaluate(mid)
        if found is None:
            hi = mid
        else:
            lo, best = mid, found
    return best


def at_rate(space: SearchSpace, cand: Candidate, rate: float) -> Candidate | None:
    """The same deployment planned for another rate (None: the SLA no longer holds)."""
    if cand.mode is Mode.AGG:
        pool = cand.pool(PoolRole.AGG)
        return _agg(space, cand.shape[0], pool.max_batch, pool.workers, rate)
    prefill, decode = cand.pool(PoolRole.PREFILL), cand.pool(PoolRole.DECODE)
    return _disagg(space, cand.shape[0], prefill.workers, cand.shape[1], decode.max_batch,
                   decode.workers, rate)


def with_one_more_worker(space: SearchSpace, cand: Candidate) -> Candidate | None:
    """The same deployment at the same rate with one more worker in the pool that runs out
    first (more headroom where it is short)."""
    if cand.mode is Mode.AGG:
        pool = cand.pool(PoolRole.AGG)
        return _agg(space, cand.shape[0], pool.max_batch, pool.workers + 1, cand.rate)
    prefill, decode = cand.pool(PoolRole.PREFILL), cand.pool(PoolRole.DECODE)
    more_prefill = cand.limit == "prefill"
    return _disagg(space, cand.shape[0], prefill.workers + more_prefill, cand.shape[1],
                   decode.max_batch, decode.workers + (not more_prefill), cand.rate)


# --- objective (a): fewest GPUs for a rate ---------------------------------------------------

def fewest_gpus(space: SearchSpace, rate: float) -> list[Candidate]:
    """The smallest deployment of each shape that serves `rate` under the SLA."""
    found: list[Candidate] = []
    for d in space.decode:
        for batch in space.decode_batches(d):
            for p in space.prefill:
                best = _fewest_disagg(space, p, d, batch, rate)
                if best is not None:
                    found.append(best)
    for worker, batch in space.agg_options():
        fewest = math.floor(rate / worker.capacity_per_s(batch)) + 1
        for workers in range(fewest, min(fewest + EXTRA_AGG_WORKERS_TRIED,
                                          MAX_GPUS // worker.tp + 1)):
            cand = _agg(space, worker, batch, workers, rate)
            if cand is not None:
                found.append(cand)
                break
    return found


def _fewest_disagg(space: SearchSpace, p: PrefillWorker, d: DecodeCurve, batch: int,
                   rate: float) -> Candidate | None:
    """The fewest prefill + decode GPUs of this shape that serve `rate` under the SLA."""
    fewest_decode = math.floor(rate / d.capacity_per_s(batch, space.workload.osl)) + 1
    fewest_prefill = math.floor(rate / p.capacity_per_s) + 1
    if fewest_prefill * p.tp + fewest_decode * d.tp > MAX_GPUS:
        return None
    best = None
    for prefill_workers, decode_workers in _worker_counts_by_gpus(
            fewest_prefill, p.tp, fewest_decode, d.tp):
        if best is not None and prefill_workers * p.tp + decode_workers * d.tp > best.gpus:
            break
        cand = _disagg(space, p, prefill_workers, d, batch, decode_workers, rate)
        if cand is not None and (best is None or _fewer_gpus_first(cand, best)):
            best = cand
    return best


def _worker_counts_by_gpus(fewest_prefill: int, tp_prefill: int, fewest_decode: int,
                           tp_decode: int) -> list[tuple[int, int]]:
    """(prefill workers, decode workers) from the capacity minimum up, fewest GPUs first."""
    counts = [(n_prefill, n_decode)
              for n_prefill in range(fewest_prefill,
                                     fewest_prefill + EXTRA_PREFILL_WORKERS_TRIED)
              for n_decode in range(fewest_decode, fewest_decode + EXTRA_DECODE_WORKERS_TRIED)]
    return sorted(counts, key=lambda c: (c[0] * tp_prefill + c[1] * tp_decode, c))


def _fewer_gpus_first(a: Candidate, b: Candidate) -> bool:
    """Objective (a)'s order: fewer GPUs, then the shorter p90 TTFT."""
    return (a.gpus, a.prediction.ttft_p90_ms) < (b.gpus, b.prediction.ttft_p90_ms)


# --- objective (b): most goodput for a budget ------------------------------------------------

def most_goodput(space: SearchSpace, budget: int) -> list[Candidate]:
    """The highest-goodput deployment of each shape within `budget` GPUs."""
    found: list[Candidate] = []
    for d in space.decode:
        for batch in space.decode_batches(d):
            for p in space.prefill:
                best = _most_goodput_disagg(space, p, d, batch, budget)
                if best is not None:
                    found.append(best)
    for worker, batch in space.agg_options():
        workers = budget // worker.tp
        if workers < 1:
            continue
        cand = _max_rate(lambda r, w=worker, b=batch, n=workers: _agg(space, w, b, n, r),
                         workers * worker.capacity_per_s(batch))
        if cand is not None:
            found.append(_shrink_agg(space, worker, batch, cand))
    return found


def _most_goodput_disagg(space: SearchSpace, p: PrefillWorker, d: DecodeCurve, batch: int,
                         budget: int) -> Candidate | None:
    decode_capacity = d.capacity_per_s(batch, space.workload.osl)
    splits = [(n_prefill, (budget - n_prefill * p.tp) // d.tp)
              for n_prefill in range(1, (budget - d.tp) // p.tp + 1)]
    splits = [(n_prefill, n_decode) for n_prefill, n_decode in splits if n_decode >= 1]
    # Goodput peaks where prefill and decode capacity balance: search near there.
    splits.sort(key=lambda s: -min(s[0] * p.capacity_per_s, s[1] * decode_capacity))
    best = None
    for prefill_workers, decode_workers in splits[:BALANCED_SPLITS_TRIED]:
        cand = _rate_then_shrink(space, p, prefill_workers, d, batch, decode_workers)
        if cand is not None and (best is None or _more_goodput_first(cand, best)):
            best = cand
    return best


def _rate_then_shrink(space: SearchSpace, p: PrefillWorker, prefill_workers: int,
                      d: DecodeCurve, batch: int, decode_workers: int) -> Candidate | None:
    """The highest rate these worker counts sustain, then without the workers it does not
    need (same goodput, fewer GPUs)."""
    capacity = min(prefill_workers * p.capacity_per_s,
                   decode_workers * d.capacity_per_s(batch, space.workload.osl))
    cand = _max_rate(lambda r: _disagg(space, p, prefill_workers, d, batch, decode_workers, r),
                     capacity)
    if cand is None:
        return None
    for role in (PoolRole.DECODE, PoolRole.PREFILL):
        while True:
            fewer_prefill = prefill_workers - (role is PoolRole.PREFILL)
            fewer_decode = decode_workers - (role is PoolRole.DECODE)
            if min(fewer_prefill, fewer_decode) < 1:
                break
            smaller = _disagg(space, p, fewer_prefill, d, batch, fewer_decode, cand.rate)
            if smaller is None:
                break
            cand, prefill_workers, decode_workers = smaller, fewer_prefill, fewer_decode
    return cand


def _shrink_agg(space: SearchSpace, worker: AggCurve, batch: int,
                cand: Candidate) -> Candidate:
    workers = cand.pools[0].workers
    while workers > 1 and (
            smaller := _agg(space, worker, batch, workers - 1, cand.rate)) is not None:
        cand, workers = smaller, workers - 1
    return cand


def _more_goodput_first(a: Candidate, b: Candidate) -> bool:
    """Objective (b)'s order: more goodput, then fewer GPUs."""
    return (-a.rate, a.gpus) < (-b.rate, b.gpus)


# --- a fixed split (the seed's 8 prefill + 40 decode GPUs) --------------------------------

def best_for_split(space: SearchSpace, prefill_gpus: int, decode_gpus: int) -> Candidate | None:
    """The most goodput a fixed prefill/decode GPU split gives, over TP and batch."""
    best = None
    for d in space.decode:
        if decode_gpus % d.tp:
            continue
        for batch in space.decode_batches(d):
            for p in space.prefill:
                if prefill_gpus % p.tp:
                    continue
                prefill_workers, decode_workers = prefill_gpus // p.tp, decode_gpus // d.tp
                capacity = min(prefill_workers * p.capacity_per_s,
                               decode_workers * d.capacity_per_s(batch, space.workload.osl))
                cand = _max_rate(
                    lambda r, p=p, d=d, b=batch, n_p=prefill_workers, n_d=decode_workers:
                    _disagg(space, p, n_p, d, b, n_d, r), capacity)
                if cand is not None and (best is None or _more_goodput_first(cand, best)):
                    best = cand
    return best


# --- ranking ---------------------------------------------------------------------------------

# The verification backs a budget plan off in steps of this share of its rate, so goodputs
# closer than it are ones the replay cannot tell apart.
BACKOFF_STEP = 0.02


def most_goodput_first(candidates: Iterable[Candidate], head: int = 32) -> list[Candidate]:
    """Objective (b)'s order: the most goodput, except that among goodputs within one
    back-off step of the best left the deployment on the fewest GPUs comes first (the budget
    is a ceiling: GPUs it leaves unused are saved, and tokens/s/GPU divides by the GPUs
    used). Applied to the first `head` places; the rest by goodput."""
    rest = sorted(candidates, key=lambda c: (-c.rate, c.gpus))
    out: list[Candidate] = []
    while rest and len(out) < head:
        floor = rest[0].rate * (1 - BACKOFF_STEP)
        near = 1
        while near < len(rest) and rest[near].rate >= floor:
            near += 1
        pick = min(range(near), key=lambda i: (rest[i].gpus, -rest[i].rate))
        out.append(rest.pop(pick))
    return out + rest


def rank(candidates: Iterable[Candidate], objective: Objective) -> list[Candidate]:
    """Best first, one row per deployment shape (worker counts and TP of each pool)."""
    if objective is Objective.FEWEST_GPUS:
        ordered = sorted(candidates, key=lambda c: (c.gpus, c.prediction.ttft_p90_ms))
    else:
        ordered = most_goodput_first(candidates)
    seen: set[tuple] = set()
    out = []
    for cand in ordered:
        shape = (cand.mode, tuple((p.role, p.workers, p.tp) for p in cand.pools))
        if shape not in seen:
            seen.add(shape)
            out.append(cand)
    return out
