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
from dataclasses import dataclass
from pathlib import Path

from ..sizing import fit_worker_memory
from ..topology import Mode, PoolRole
from .perf_model import ModelOnGpu
from .predict import kv_transfer_gbps
from .request import Workload
from .search import Candidate, PoolPlan

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
class ReplayResult:
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
    served_rate: float
    output_tokens_per_s: float
    sla_met_share: float
    wall_s: float


def kv_blocks(target: ModelOnGpu, pool: PoolPlan, block_size: int = BLOCK_SIZE) -> int:
    """KV blocks a worker of this pool has on the planned GPU (what TRT-LLM would allocate
    after weights and runtime reserve), for the mocker to admit requests the same way."""
    per_token = target.kv_bytes_per_token / pool.tp
    fit = fit_worker_memory(arch=target.architecture, gpu=target.gpu,
                            weight_bytes_per_param=target.dtype.bytes_per_param,
                            kv_bytes_per_element=target.kv_cache_dtype.bytes_per_element,
                            tensor_parallel=pool.tp, batch=0, seq_len=1)
    room = fit.gpu_memory_gib - fit.weights_gib - fit.reserve_gib
    return max(1, int(room * 1024**3 / per_token) // block_size)


def engine_args(target: ModelOnGpu, plan: Candidate, pool: PoolPlan, profile: Path,
                gpus_per_node: int) -> dict:
    engine = {
        "backend": "trtllm", "worker_type": pool.role.worker_type, "block_size": BLOCK_SIZE,
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
                gpus_per_node: int = 8, seed: int = 42) -> ReplayResult:
    """Replay the workload at the plan's rate: `requests` synthetic requests (default: enough
    for a steady state), or the trace itself."""
    # The simulator logs every routing decision at INFO; keep the terminal readable.
    os.environ.setdefault("DYN_LOG", "warn")
    from dynamo.replay import run_synthetic_trace_replay, run_trace_replay

    kwargs: dict = {"router_mode": "kv_router", "sla_ttft_ms": ttft_sla_ms,
                    "sla_itl_ms": itl_sla_ms, "capture_per_request": True}
    if plan.mode is Mode.DISAGG:
        prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
        kwargs |= {"num_prefill_workers": prefill.workers, "num_decode_workers": decode.workers,
                   "prefill_engine_args": engine_args(target, plan, prefill, profile,
                                                      gpus_per_node),
                   "decode_engine_args": engine_args(target, plan, decode, profile,
                                                     gpus_per_node)}
    else:
        agg = plan.pool(PoolRole.AGG)
        kwargs |= {"num_workers": agg.workers,
                   "extra_engine_args": engine_args(target, plan, agg, profile,
                                                    gpus_per_node)}
    count = requests or requests_for_steady_state(plan)
    started = time.perf_counter()
    if workload.trace is not None:
        report = run_trace_replay(str(workload.trace.path), trace_format="mooncake",
                                  trace_block_size=workload.trace.block_size, **kwargs)
    else:
        report = run_synthetic_trace_replay(workload.isl, workload.osl, count,
                                            request_rate=plan.rate, arrival_seed=seed,
                                            **kwargs)
    wall = time.perf_counter() - started
    return summarize(report, plan.rate, wall, ttft_sla_ms=ttft_sla_ms, itl_sla_ms=itl_sla_ms)


def requests_for_steady_state(plan: Candidate) -> int:
    """Enough requests that arrivals span WARMUP + MEASURED end-to-end latencies, so the
    decode batch settles before it is measured; never fewer than DEFAULT_REQUESTS."""
    pred = plan.prediction
    e2e_s = (pred.ttft_mean_ms + plan.osl * pred.itl_ms) / 1000.0
    wanted = plan.rate * e2e_s * (WARMUP_E2E + MEASURED_E2E + 1)
    return int(min(MAX_REQUESTS, max(DEFAULT_REQUESTS, math.ceil(wanted))))


def summarize(report, offered_rate: float, wall_s: float, *, ttft_sla_ms: float,
              itl_sla_ms: float) -> ReplayResult:
    """Steady-state figures: requests that arrive after the batch has filled (WARMUP_E2E
    end-to-end latencies in) and finish before arrivals stop; the whole run when it is too
    short to have such a window (the result says so)."""
    done = [r for r in report.per_request if r.get("terminal_status") == "completed"]
    arrivals = sorted(r["arrival_time_ms"] for r in done)
    e2e = statistics.median(r["e2e_latency_ms"] for r in done)
    start, stop = arrivals[0] + WARMUP_E2E * e2e, arrivals[-1] - e2e
    window = [r for r in done if start <= r["arrival_time_ms"] and r["terminal_time_ms"] <= stop]
    steady = stop - start >= MEASURED_E2E * e2e / 2 and len(window) >= MIN_WINDOW_REQUESTS
    if not steady:
        window, start, stop = done, arrivals[0], max(r["terminal_time_ms"] for r in done)
    ttfts = sorted(r["ttft_ms"] for r in window)
    itls = sorted(r["itl_ms"] for r in window)
    finished = sum(1 for r in done if start <= r["terminal_time_ms"] <= stop)
    arrived = sum(1 for r in done if start <= r["arrival_time_ms"] <= stop)
    seconds = (stop - start) / 1000.0
    mean_output = statistics.fmean(r["output_length"] for r in window)
    met = sum(1 for r in window if r["ttft_ms"] <= ttft_sla_ms and r["itl_ms"] <= itl_sla_ms)
    return ReplayResult(
        requests=len(done), measured_requests=len(window), steady=steady,
        offered_rate=offered_rate, arrival_rate=arrived / seconds,
        ttft_mean_ms=statistics.fmean(ttfts), ttft_p90_ms=ttfts[int(0.9 * (len(ttfts) - 1))],
        itl_mean_ms=statistics.fmean(itls), itl_p90_ms=itls[int(0.9 * (len(itls) - 1))],
        served_rate=finished / seconds, output_tokens_per_s=finished / seconds * mean_output,
        sla_met_share=met / len(window), wall_s=wall_s)
