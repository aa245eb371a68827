"""An aggregated worker's closed-form TTFT against Dynamo's replay, over the load.

70B FP8 on one TP2 H100 worker, 5000/500, Poisson arrivals, the plan a loose SLA picks
(batch cap 80): the closed form (`predict_agg`: the request's own prompt step, half a step of
landing, Erlang C for the per-step prompt budget) and the replay of the same worker on the
same step tables, at shares of the planned rate. Where the two part shows where the closed
form stops describing the scheduler.

    python benchmarks/agg_ttft_vs_replay.py
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "toolkit"))

SHARES = (0.5, 0.8, 0.9, 0.95, 1.0, 1.02)
REQUESTS = 3000


def main() -> int:
    from dis_serve.plan.mocker_profile import profile_tables, write_profile
    from dis_serve.plan.recommend import make_plan
    from dis_serve.plan.replay import replay_plan
    from dis_serve.plan.request import build_request
    from dis_serve.plan.search import at_rate

    request = build_request(model="llama-3.1-70b", gpu="h100-sxm", isl=5000, osl=500,
                            budget=2, tp=2, ttft_ms=60000, itl_ms=1000, dtype="fp8",
                            kv_cache_dtype="fp8", arrival="poisson")
    result = make_plan(request)
    plan = result.chosen
    work = Path(tempfile.mkdtemp(prefix="agg-ttft-"))
    profile = write_profile(profile_tables(result.model, plan, result.workload.isl,
                                           result.space.seq_len), work / "profile.npz")
    capacity = plan.shape[0].capacity_per_s(plan.pools[0].spec.max_batch_size)
    print(f"plan {plan.label}: {plan.rate:.3f} req/s, {plan.rate / capacity:.0%} of what its "
          "full batch completes")
    print("| share of rate | req/s | batch (model) | TTFT mean model / replay | "
          "TTFT p90 model / replay |")
    print("|---:|---:|---:|---:|---:|")
    for share in SHARES:
        rate = plan.rate * share
        model = at_rate(result.space, plan, rate)
        # The replay at that rate, on the planned worker and its step tables.
        at = dataclasses.replace(plan, prediction=dataclasses.replace(plan.prediction,
                                                                      rate_per_s=rate))
        rep = replay_plan(request.target(), at, profile, result.workload, ttft_sla_ms=60000,
                          itl_sla_ms=1000, requests=REQUESTS, gpus_per_node=8)
        pred = ("-", "-", "-") if model is None else (
            f"{model.prediction.concurrency_per_worker:.0f}",
            f"{model.prediction.ttft_mean_ms:,.0f}", f"{model.prediction.ttft_p90_ms:,.0f}")
        print(f"| {share:.2f} | {rate:.3f} | {pred[0]} | {pred[1]} / {rep.ttft_mean_ms:,.0f} | "
              f"{pred[2]} / {rep.ttft_p90_ms:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
