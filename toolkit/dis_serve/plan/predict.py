"""Latency and throughput of one deployment at one request rate.

Disaggregated: a request waits for a prefill worker (a pool of deterministic servers), runs
its prefill pass, ships its KV cache, waits for a decode slot and emits its first token after
a decode step; Dynamo's replay measures TTFT at that first token too. Decode step time
depends on how many requests share the worker, which in turn depends on step time (Little's
law), so the concurrency is solved as a fixed point. A decode worker takes new work only
between steps: it reserves room for the request at the next step boundary (half a step on
average), activates it at the first boundary after its KV cache has arrived, and emits the
first token one step later; Dynamo's replay shows the same 2.5 steps.

Aggregated: AIConfigurator's own in-flight-batching estimate (`run_agg`: mixed prefill/decode
steps under a per-step context-token budget, as TRT-LLM schedules them) at the batch the load
settles at, its TTFT the request's own prompt steps plus the wait for the prompt budget."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

from .perf_model import ModelOnGpu
from .pools import AggCurve, DecodeCurve, PrefillWorker
from .queueing import UNSTABLE, Wait, pool_wait

# KV-cache transfer between prefill and decode workers: NVLink inside a node (the figure
# Dynamo's mocker documents for it) and one 400 Gb/s RDMA NIC per GPU between nodes (HGX
# H100 systems); each tensor-parallel rank sends its own shard, so lanes add up.
NVLINK_KV_GBPS = 450.0
NETWORK_KV_GBPS = 50.0
# Batch slots (decode or aggregated) are planned to carry at most this share of their
# saturated throughput. Step time grows with the batch, so near saturation a Poisson burst
# lengthens every step, which admits the next burst later still: the batch drifts for minutes
# before it settles (Dynamo's replay shows it), and any error in the step-time data turns
# into a queue. AIConfigurator keeps similar headroom (its 0.92 decode rate-matching factor).
MAX_SLOT_LOAD = 0.9
# Prefill pools are planned to carry at most this share of their capacity: AIConfigurator's
# prefill rate-matching degradation (a serving prefill worker loses that much to scheduling
# and transfer gaps a pure pass time does not show).
MAX_PREFILL_LOAD = 0.9
# The share of requests the SLA's percentile holds for unless the plan says otherwise (p90:
# nine in ten).
DEFAULT_SLA_SHARE = 0.9
# An aggregated worker's batch cap sits this many standard deviations of its (Poisson)
# concurrency above the planned mean, so a burst queues rarely (`agg_concurrency_spread`).
AGG_SLOT_HEADROOM_Z = 2.0


@dataclass(frozen=True)
class Prediction:
    """What the model expects a deployment to do at `rate_per_s`."""

    rate_per_s: float
    ttft_mean_ms: float
    ttft_p90_ms: float
    itl_ms: float
    itl_p90_ms: float
    """90th percentile over requests of each request's own mean inter-token latency."""
    ttft_tail_ms: float
    """TTFT at the SLA's percentile (`sla_share`; the 90th percentile by default)."""
    itl_tail_ms: float
    """Per-request mean ITL at the SLA's percentile."""
    queue_wait_ms: float
    """Mean wait for a prefill worker (disagg) or for a batch slot (agg)."""
    service_ms: float
    """Prefill pass (disagg) or in-batch time to first token (agg)."""
    handoff_ms: float
    """Disagg: KV transfer, admission at decode step boundaries and the first decode step."""
    decode_wait_ms: float
    prefill_utilization: float
    slot_utilization: float
    """Busy share of decode (or aggregated) batch slots."""
    concurrency_per_worker: float
    sla_share: float = DEFAULT_SLA_SHARE
    """The share of requests the tails are read at."""


def normal_quantile(share: float) -> float:
    """The standard normal deviate below which `share` of the mass lies (1.28 at 0.9)."""
    return NormalDist().inv_cdf(share)


def kv_transfer_gbps(tp_prefill: int, tp_decode: int, spans_nodes: bool) -> float:
    lanes = min(tp_prefill, tp_decode)
    return lanes * (NETWORK_KV_GBPS if spans_nodes else NVLINK_KV_GBPS)


def transfer_ms(target: ModelOnGpu, isl: int, gbps: float) -> float:
    return isl * target.kv_bytes_per_token / (gbps * 1e9) * 1000.0


def decode_concurrency(curve: DecodeCurve, rate_per_worker: float, osl: int,
                       max_batch: int, *, closed_loop: bool = False) -> float | None:
    """Requests a decode worker holds at steady state (None: it cannot keep up). Under
    Poisson arrivals its slots carry at most MAX_SLOT_LOAD of their saturated throughput; in
    a closed loop nothing arrives in bursts and the batch may run at its cap."""
    if rate_per_worker <= 0:
        return 0.0
    max_load = 1.0 if closed_loop else MAX_SLOT_LOAD
    if rate_per_worker > max_load * curve.capacity_per_s(max_batch, osl):
        return None
    concurrency = rate_per_worker * osl * curve.itl_at(1) / 1000.0
    for _ in range(60):
        updated = rate_per_worker * osl * curve.itl_at(concurrency) / 1000.0
        if abs(updated - concurrency) < 1e-3:
            break
        concurrency = updated
    return concurrency if concurrency <= max_batch else None


def predict_disagg(prefill: PrefillWorker, prefill_workers: int, decode: DecodeCurve,
                   decode_batch: int, decode_workers: int, rate_per_s: float, *, osl: int,
                   kv_transfer_ms: float, closed_loop: bool = False,
                   sla_share: float = DEFAULT_SLA_SHARE) -> Prediction | None:
    """The latencies at `rate_per_s`, their tails read at the 90th percentile and at the
    SLA's (`sla_share`): the admission boundary at that share of a step, the queues' waits
    at that share, the ITL that many standard deviations of the batch above its mean."""
    # A batching prefill worker runs a full batch only when prompts queue; a prompt that
    # finds a worker free runs alone. Capacity is the full batch's.
    prefill_wait = _wait(prefill_workers, prefill.service_ms / prefill.batch, rate_per_s,
                         closed_loop)
    if not prefill_wait.stable or prefill_wait.utilization > MAX_PREFILL_LOAD:
        return None
    concurrency = decode_concurrency(decode, rate_per_s / decode_workers, osl, decode_batch,
                                     closed_loop=closed_loop)
    if concurrency is None:
        return None
    itl = decode.itl_at(concurrency)
    slot_wait = _wait(decode_workers * decode_batch, osl * itl, rate_per_s, closed_loop)
    if not slot_wait.stable:
        return None
    service = prefill.single_ms + (prefill.service_ms - prefill.single_ms) * (
        prefill_wait.delayed)
    steps = max(1, math.ceil(kv_transfer_ms / itl)) * itl + itl
    handoff = 0.5 * itl + steps
    # Concurrency is Poisson-like (spread sqrt(b)); a request's ITL averages it over its
    # whole generation, which halves the spread it feels. A closed loop holds it fixed.
    spread = 0.0 if closed_loop else decode.itl_at(concurrency + math.sqrt(concurrency)) - itl

    def ttft_at(share: float) -> float:
        return (service + share * itl + steps + prefill_wait.tail_ms(share)
                + slot_wait.tail_ms(share))

    def itl_at(share: float) -> float:
        return itl + normal_quantile(share) * spread / 2

    return Prediction(
        rate_per_s=rate_per_s,
        ttft_mean_ms=service + handoff + prefill_wait.mean_ms + slot_wait.mean_ms,
        ttft_p90_ms=ttft_at(0.9), itl_ms=itl, itl_p90_ms=itl_at(0.9),
        ttft_tail_ms=ttft_at(sla_share), itl_tail_ms=itl_at(sla_share),
        queue_wait_ms=prefill_wait.mean_ms, service_ms=service,
        handoff_ms=handoff, decode_wait_ms=slot_wait.mean_ms,
        prefill_utilization=prefill_wait.utilization,
        slot_utilization=concurrency / decode_batch, concurrency_per_worker=concurrency,
        sla_share=sla_share)


def predict_agg(curve: AggCurve, workers: int, max_batch: int, rate_per_s: float, *,
                closed_loop: bool = False,
                sla_share: float = DEFAULT_SLA_SHARE) -> Prediction | None:
    """An aggregated pool: each worker holds as many requests as it completes per second
    times their latency (Little's law), and serves them as AIConfigurator's in-flight
    batching estimate says a batch of that size is served. Under Poisson arrivals a worker
    carries at most MAX_SLOT_LOAD of its saturated throughput, as a decode worker's slots do
    (near saturation a burst slows every step and the batch drifts: MLPerf's H100 Server run
    delivered 0.88 of its offline throughput where the plan, at 99% of saturation, had
    promised 1.00), and the arrivals spread the batch by its square root times how steeply
    it grows with the rate (`agg_concurrency_spread`): the percentiles are read that much
    higher, and the cap must leave room for it; a closed loop holds the batch where it is,
    up to the cap. The
    tails are read at the 90th percentile and at the SLA's (`sla_share`)."""
    rate = rate_per_s / workers
    if not closed_loop and rate > MAX_SLOT_LOAD * curve.saturated_per_s(max_batch):
        return None
    concurrency = curve.concurrency_at(rate)
    if concurrency is None:
        return None
    spread = 0.0 if closed_loop else agg_concurrency_spread(curve, rate, concurrency)
    if concurrency + AGG_SLOT_HEADROOM_Z * spread > max_batch:
        return None
    itl = curve.itl_at(concurrency)
    ttft = curve.ttft_at(concurrency)
    # Prompts queue for the per-step prompt budget (Poisson bursts; none below capacity in a
    # closed loop): `prompts_per_step` servers, each held for a prompt's own steps. A request
    # also lands while a step runs and joins the next one: half a step on average, nearly
    # always a decode step (a closed loop's next request is sent as one ends, and the step
    # after it has started by then; Dynamo's replay shows the half step in both).
    prompt_wait = _wait(curve.prompts_per_step, ttft, rate, closed_loop)
    if not prompt_wait.stable:
        return None
    boundary = 0.5 * itl
    # A request's ITL averages the batch over its whole generation, which halves the spread
    # it feels (as for decode workers).
    itl_spread = curve.itl_at(concurrency + spread) - itl

    def ttft_at(share: float) -> float:
        z = normal_quantile(share)
        return (max(ttft, curve.ttft_at(concurrency + z * spread)) + boundary
                + prompt_wait.tail_ms(share))

    def itl_at(share: float) -> float:
        return itl + normal_quantile(share) * itl_spread / 2

    return Prediction(
        rate_per_s=rate_per_s, ttft_mean_ms=ttft + boundary + prompt_wait.mean_ms,
        ttft_p90_ms=ttft_at(0.9), itl_ms=itl, itl_p90_ms=itl_at(0.9),
        ttft_tail_ms=ttft_at(sla_share), itl_tail_ms=itl_at(sla_share),
        queue_wait_ms=prompt_wait.mean_ms, service_ms=ttft, handoff_ms=0.0,
        decode_wait_ms=0.0,
        prefill_utilization=curve.prefill_share_at(concurrency),
        slot_utilization=concurrency / max_batch, concurrency_per_worker=concurrency,
        sla_share=sla_share)


# Relative step in the request rate for the slope of concurrency against rate.
ELASTICITY_STEP = 0.02


def agg_concurrency_spread(curve: AggCurve, rate_per_s: float, concurrency: float) -> float:
    """Standard deviation of an aggregated worker's batch under Poisson arrivals. Over one
    request's stay the arrivals that make up the batch vary by sqrt(N) (N = rate x stay); were
    the stay fixed, so would the batch. But every request in the batch slows every step, so
    a burst lengthens the stay of all of them and the batch grows by more: the spread is
    sqrt(N) times the elasticity of concurrency in rate, d ln N / d ln rate, read off the
    worker's own curve (never below 1: a larger batch never shortens a stay). Near the
    batch's saturation the elasticity is several (70B TP2 H100 5000/500 at 96% of its capped
    rate: 3.5, and Dynamo's replay has 19% of requests arrive to a full batch of 80 where
    sqrt(64) promised 2.5%); None where the worker cannot take the rate a little higher."""
    below = curve.concurrency_at(rate_per_s * (1 - ELASTICITY_STEP))
    above = curve.concurrency_at(rate_per_s * (1 + ELASTICITY_STEP))
    if below is None:
        return math.sqrt(concurrency)
    upper, span = (above, 2 * ELASTICITY_STEP) if above is not None else (
        concurrency, ELASTICITY_STEP)
    elasticity = (upper - below) / span / max(concurrency, 1e-9)
    return max(1.0, elasticity) * math.sqrt(concurrency)


def _wait(servers: int, service_ms: float, rate_per_s: float, closed_loop: bool) -> Wait:
    """Queueing before service: Erlang C for Poisson arrivals; none below capacity in a
    closed loop, where the next request is sent as one finishes (no bursts to queue)."""
    if not closed_loop:
        return pool_wait(servers=servers, service_ms=service_ms, rate_per_s=rate_per_s)
    utilization = rate_per_s * service_ms / 1000.0 / servers
    return Wait(0.0, 0.0, utilization) if utilization < 1.0 else UNSTABLE
