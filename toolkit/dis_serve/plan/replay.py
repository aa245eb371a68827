"""Check a plan in Dynamo's virtual-clock simulator and compare it with the prediction.

`dynamo.replay` runs the mocker engine and the KV router in one process on a simulated clock
(no sleeping, no network): it sends the plan's workload at the planned rate to the planned
worker counts, each worker timed by the plan's profile tables, and reports what every
request saw. The prediction (queueing formulas over the same tables) and the replay (a real
scheduler, router and batcher) then agree or do not; both numbers are shown.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, replace
from pathlib import Path

from ..engines import planned_engine
from ..hardware.sizing import fit_worker_memory
from ..topology import Mode, PoolRole
from .perf_model import ModelOnGpu
from .predict import DEFAULT_SLA_SHARE, kv_transfer_gbps
from .request import Workload
from .search import Candidate, PoolPlan

# A deployment whose steady state needs more requests than REPLAY_TARGET_REQUESTS is
# replayed as a slice of it: the router spreads load evenly, so a slice with its share of the
# rate and the same prefill:decode ratio sees what each worker of the whole sees (its own
# queue, its own batch), in a run small enough to reach steady state in seconds at any size.
# A slice keeps at least MIN_SLICE_WORKERS workers (fewer would queue more than the whole) and
# at most REPLAY_MAX_WORKERS.
REPLAY_TARGET_REQUESTS = 4000
MIN_SLICE_WORKERS = 2
# An aggregated worker batching this many requests is a big enough sample on its own: its
# slice may be that one worker.
BUSY_AGG_WORKER = 64
REPLAY_MAX_WORKERS = 32
# A slice's pools may differ from the whole's ratio by this much before a smaller slice with
# an exact ratio is preferred.
SLICE_RATIO_TOLERANCE = 0.03
DEFAULT_REQUESTS = 2000
MAX_REQUESTS = 30000
BLOCK_SIZE = 32
# A decode batch fills over about one end-to-end latency and, under load, keeps drifting for
# a couple more (step time grows with the batch it waits for): measure after three, for at
# least four.
WARMUP_E2E = 3
MEASURED_E2E = 4
MIN_WINDOW_REQUESTS = 200


@dataclass(frozen=True)
class ReplaySlice:
    """The part of a deployment the replay runs: workers per pool (in the plan's pool order)
    and the share of the plan's rate they get."""

    workers: tuple[int, ...]
    share: float

    def describe(self, plan: Candidate) -> str:
        counts = " + ".join(f"{n} {p.role.value}" for n, p in zip(self.workers, plan.pools,
                                                                  strict=True))
        if self.share >= 1.0:
            return f"the whole deployment ({counts} workers)"
        whole = " + ".join(str(p.workers) for p in plan.pools)
        return (f"a slice of {counts} workers (of {whole}) at {self.share:.1%} of the rate "
                f"({plan.rate * self.share:.2f} of {plan.rate:.2f} req/s)")


def slice_workers(plan: Candidate) -> int:
    """The most workers a replay of this plan needs: all of them when their steady state
    takes at most REPLAY_TARGET_REQUESTS requests, else proportionally fewer."""
    workers = sum(p.workers for p in plan.pools)
    wanted = _steady_state_requests(plan, plan.rate)
    if wanted <= REPLAY_TARGET_REQUESTS:
        return workers
    fewer = math.floor(workers * REPLAY_TARGET_REQUESTS / wanted)
    busy = plan.mode is Mode.AGG and plan.prediction.concurrency_per_worker >= BUSY_AGG_WORKER
    return min(workers, REPLAY_MAX_WORKERS, max(1 if busy else MIN_SLICE_WORKERS, fewer))


def representative_slice(plan: Candidate, target_workers: int) -> ReplaySlice:
    """The whole deployment when it has at most `target_workers` workers; else a slice of
    about that many (the smallest at least that big, never more than REPLAY_MAX_WORKERS)
    whose pools keep the whole's ratio within SLICE_RATIO_TOLERANCE, at the larger of its
    pools' shares of the rate, so no pool of the slice carries less load per worker than the
    whole. Where no slice keeps the ratio, the whole deployment runs if it is small enough,
    else the slice closest to it."""
    counts = [p.workers for p in plan.pools]
    whole = ReplaySlice(tuple(counts), 1.0)
    if sum(counts) <= target_workers:
        return whole
    if len(counts) == 1:
        return ReplaySlice((target_workers,), target_workers / counts[0])
    n_p, n_d = counts
    options = []  # (ratio mismatch, workers, share)
    for d in range(1, n_d + 1):
        p = max(1, round(n_p * d / n_d))
        if p + d > REPLAY_MAX_WORKERS:
            break
        share = max(p / n_p, d / n_d)
        if p <= n_p:
            options.append((abs(p / n_p - d / n_d) / share, (p, d), share))
    close = [(w, share) for miss, w, share in options if miss <= SLICE_RATIO_TOLERANCE]
    if not close:
        if sum(counts) <= REPLAY_MAX_WORKERS or not options:
            return whole
        _, workers, share = min(options, key=lambda o: (o[0], -sum(o[1])))
        return ReplaySlice(workers, share)
    big_enough = [c for c in close if sum(c[0]) >= target_workers]
    workers, share = big_enough[0] if big_enough else close[-1]
    return ReplaySlice(workers, share)


@dataclass(frozen=True)
class ReplayResult:
    replayed: str
    """What ran: the whole deployment or which slice of it."""
    requests: int
    measured_requests: int
    steady: bool
    offered_rate: float
    arrival_rate: float
    """Arrivals per second the random arrival process actually produced in the window."""
    ttft_mean_ms: float
    ttft_p90_ms: float
    itl_mean_ms: float
    itl_p90_ms: float
    """90th percentile of the requests' own mean inter-token latency."""
    ttft_tail_ms: float
    """TTFT at the SLA's percentile (`sla_share`)."""
    itl_tail_ms: float
    served_rate: float
    output_tokens_per_s: float
    sla_met_share: float
    sla_share: float
    """The share of requests the plan promises meet the SLA (its percentile)."""
    wall_s: float
    window_arrivals: int = 0
    """Requests that arrived in the measured window (of the slice that ran)."""
    in_system: float = 0.0
    """Mean number of requests in the slice at once over the window (Little's law)."""


def kv_blocks(target: ModelOnGpu, pool: PoolPlan, block_size: int = BLOCK_SIZE) -> int:
    """KV blocks a worker of this pool has on the planned GPU (what TRT-LLM allocates: its
    share of the memory beside weights and runtime), for the mocker to admit requests the
    same way."""
    per_token = target.kv_bytes_per_token / pool.tp
    fit = fit_worker_memory(arch=target.architecture, gpu=target.gpu,
                            weight_bytes_per_param=target.dtype.bytes_per_param,
                            kv_bytes_per_element=target.kv_cache_dtype.bytes_per_element,
                            tensor_parallel=pool.tp, batch=0, seq_len=1,
                            kv_share=target.kv_share)
    return max(1, int(fit.kv_room_gib * 1024**3 / per_token) // block_size)


def engine_args(target: ModelOnGpu, plan: Candidate, pool: PoolPlan, profile: Path,
                gpus_per_node: int) -> dict:
    engine = {
        "backend": planned_engine().replay_backend, "worker_type": pool.role.worker_type,
        "block_size": BLOCK_SIZE,
        "max_num_seqs": pool.max_batch, "max_num_batched_tokens": pool.max_num_tokens,
        "num_gpu_blocks": kv_blocks(target, pool),
        "timing_model": {"type": "external", "provider": "dynamo_profile",
                         "config": {"path": str(profile)}},
    }
    if plan.mode is Mode.DISAGG:
        prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
        engine["kv_transfer_bandwidth"] = kv_transfer_gbps(
            prefill.tp, decode.tp, plan.gpus > gpus_per_node)
        engine["kv_transfer_bytes_per_token"] = int(target.kv_bytes_per_token)
    return {"engine": engine}


def replay_plan(target: ModelOnGpu, plan: Candidate, profile: Path, workload: Workload, *,
                ttft_sla_ms: float, itl_sla_ms: float, requests: int | None = None,
                gpus_per_node: int, seed: int = 42,
                sla_share: float = DEFAULT_SLA_SHARE) -> ReplayResult:
    """Replay the workload at the plan's rate on a representative slice of it: `requests`
    synthetic requests (default: enough for a steady state), or the trace itself (whole)."""
    # The simulator logs every routing decision at INFO; keep the terminal readable.
    os.environ.setdefault("DYN_LOG", "warn")
    from dynamo.replay import run_synthetic_trace_replay, run_trace_replay

    part = (ReplaySlice(tuple(p.workers for p in plan.pools), 1.0)
            if workload.trace is not None else representative_slice(plan, slice_workers(plan)))
    kwargs: dict = {"router_mode": "kv_router", "sla_ttft_ms": ttft_sla_ms,
                    "sla_itl_ms": itl_sla_ms, "capture_per_request": True}
    args = {p.role: engine_args(target, plan, p, profile, gpus_per_node) for p in plan.pools}
    if plan.mode is Mode.DISAGG:
        kwargs |= {"num_prefill_workers": part.workers[0], "num_decode_workers": part.workers[1],
                   "prefill_engine_args": args[PoolRole.PREFILL],
                   "decode_engine_args": args[PoolRole.DECODE]}
    else:
        kwargs |= {"num_workers": part.workers[0], "extra_engine_args": args[PoolRole.AGG]}
    rate = plan.rate * part.share
    count = requests or requests_for_steady_state(plan, rate)
    started = time.perf_counter()
    if workload.trace is not None:
        report = run_trace_replay(str(workload.trace.path), trace_format="mooncake",
                                  trace_block_size=workload.trace.block_size, **kwargs)
    elif workload.closed_loop:
        report = run_synthetic_trace_replay(workload.isl, workload.osl, count,
                                            replay_concurrency=in_flight(plan, rate),
                                            arrival_seed=seed, **kwargs)
    else:
        report = run_synthetic_trace_replay(workload.isl, workload.osl, count,
                                            request_rate=rate, arrival_seed=seed, **kwargs)
    wall = time.perf_counter() - started
    result = summarize(report, rate, wall, ttft_sla_ms=ttft_sla_ms, itl_sla_ms=itl_sla_ms,
                       replayed=part.describe(plan), sla_share=sla_share,
                       closed_loop=in_flight(plan, rate) if workload.closed_loop else None)
    # Throughput of the slice, stated for the whole deployment.
    return replace(result, served_rate=result.served_rate / part.share,
                   output_tokens_per_s=result.output_tokens_per_s / part.share,
                   offered_rate=plan.rate, arrival_rate=result.arrival_rate / part.share)


def in_flight(plan: Candidate, rate: float) -> int:
    """Requests a closed loop keeps in flight for the plan to run at `rate`: each request is
    in the system for its end-to-end latency (Little's law), so the decode batches sit at
    the planned concurrency and prefill is fed as they free slots."""
    pred = plan.prediction
    e2e_s = (pred.ttft_mean_ms + plan.osl * pred.itl_ms) / 1000.0
    return max(1, round(rate * e2e_s))


def requests_for_steady_state(plan: Candidate, rate: float | None = None) -> int:
    """Enough requests that arrivals at `rate` (default: the plan's) span WARMUP + MEASURED
    end-to-end latencies, so the decode batch settles before it is measured; never fewer
    than DEFAULT_REQUESTS."""
    wanted = _steady_state_requests(plan, plan.rate if rate is None else rate)
    return int(min(MAX_REQUESTS, max(DEFAULT_REQUESTS, wanted)))


def _steady_state_requests(plan: Candidate, rate: float) -> int:
    pred = plan.prediction
    e2e_s = (pred.ttft_mean_ms + plan.osl * pred.itl_ms) / 1000.0
    return math.ceil(rate * e2e_s * (WARMUP_E2E + MEASURED_E2E + 1))


def summarize(report, offered_rate: float, wall_s: float, *, ttft_sla_ms: float,
              itl_sla_ms: float, replayed: str = "the whole deployment",
              closed_loop: int | None = None,
              sla_share: float = DEFAULT_SLA_SHARE) -> ReplayResult:
    """Steady-state figures: requests that arrive after the batch has filled (WARMUP_E2E
    end-to-end latencies in) and finish before arrivals stop; the whole run when it is too
    short to have such a window (the result says so). `closed_loop`: the requests a closed
    loop kept in flight; its throughput is that many over their mean end-to-end latency
    (Little's law, exact while the loop is full), since same-length requests finish in
    bursts that any count over a time window cuts at random."""
    done = [r for r in report.per_request if r.get("terminal_status") == "completed"]
    if closed_loop:
        window, steady = _while_the_loop_is_full(done, closed_loop)
        served = closed_loop / (statistics.fmean(r["e2e_latency_ms"] for r in window) / 1000)
        arrived, arrivals, in_system = served, len(window), float(closed_loop)
    else:
        window, start, stop, steady = _steady_window(done)
        seconds = (stop - start) / 1000.0
        served = sum(1 for r in done if start < r["terminal_time_ms"] <= stop) / seconds
        arrivals = sum(1 for r in done if start <= r["arrival_time_ms"] <= stop)
        arrived = arrivals / seconds
        in_system = arrived * statistics.fmean(r["e2e_latency_ms"] for r in window) / 1000
    ttfts = sorted(r["ttft_ms"] for r in window)
    itls = sorted(r["itl_ms"] for r in window)
    mean_output = statistics.fmean(r["output_length"] for r in window)
    met = sum(1 for r in window if r["ttft_ms"] <= ttft_sla_ms and r["itl_ms"] <= itl_sla_ms)

    def at(values: list[float], share: float) -> float:
        return values[int(share * (len(values) - 1))]

    return ReplayResult(
        replayed=replayed, requests=len(done), measured_requests=len(window), steady=steady,
        offered_rate=offered_rate, arrival_rate=arrived,
        ttft_mean_ms=statistics.fmean(ttfts), ttft_p90_ms=at(ttfts, 0.9),
        itl_mean_ms=statistics.fmean(itls), itl_p90_ms=at(itls, 0.9),
        served_rate=served, output_tokens_per_s=served * mean_output,
        sla_met_share=met / len(window), wall_s=wall_s,
        window_arrivals=arrivals, in_system=in_system, sla_share=sla_share,
        ttft_tail_ms=at(ttfts, sla_share), itl_tail_ms=at(itls, sla_share))


def _steady_window(done: list[dict]) -> tuple[list[dict], float, float, bool]:
    arrivals = sorted(r["arrival_time_ms"] for r in done)
    e2e = statistics.median(r["e2e_latency_ms"] for r in done)
    start, stop = arrivals[0] + WARMUP_E2E * e2e, arrivals[-1] - e2e
    window = [r for r in done if start <= r["arrival_time_ms"] and r["terminal_time_ms"] <= stop]
    if stop - start >= MEASURED_E2E * e2e / 2 and len(window) >= MIN_WINDOW_REQUESTS:
        return window, start, stop, True
    return done, arrivals[0], max(r["terminal_time_ms"] for r in done), False


def _while_the_loop_is_full(done: list[dict], in_flight: int) -> tuple[list[dict], bool]:
    """The requests that ran while the loop held `in_flight` requests: sent after the
    ramp-up (the first `in_flight` start together) and finished before the drain (after the
    last is sent the batch empties and steps run faster). Steady once they are
    MEASURED_E2E generations of the loop."""
    ends = sorted(r["terminal_time_ms"] for r in done)
    first = ends[min(in_flight, len(ends)) - 1]
    last = ends[max(len(ends) - in_flight - 1, 0)]
    window = [r for r in done
              if r["arrival_time_ms"] >= first and r["terminal_time_ms"] <= last]
    if not window:
        return done, False
    return window, len(window) >= max(MIN_WINDOW_REQUESTS, MEASURED_E2E * in_flight)
