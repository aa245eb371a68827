"""`dis-serve plan` at 1,024 and 4,096 GPUs: does the replay reach a steady state, how long does
it take against the search, and how much memory does the whole plan take?

Each size runs `dis-serve plan` (Llama-3.1-70B, H100, 3,000 in / 500 out, TTFT 1,000 ms,
ITL 50 ms, most goodput from the budget) in a fresh process, which reports its own peak
resident memory. Prints one row per size and writes benchmarks/results/plan_scale.json.

    python benchmarks/plan_scale.py [--budgets 1024 4096]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {toolkit!r})
from dis_serve.plan.request import build_request
from dis_serve.plan.pipeline import run_plan
request = build_request(model="llama-3.1-70b", isl=3000, osl=500, budget={budget},
                        ttft_ms=1000.0, itl_ms=50.0)
started = time.perf_counter()
outcome = run_plan(request, __import__("pathlib").Path({out!r}))
total = time.perf_counter() - started
rep = outcome.replay[0]
print(json.dumps({{
    "budget": {budget}, "plan": outcome.plan.label, "gpus": outcome.plan.gpus,
    "requests_per_s": outcome.plan.requests_per_s, "search_s": outcome.planning_seconds,
    "replays": len(outcome.verification), "replay_wall_s": rep.wall_s,
    "replayed": rep.replayed, "steady": rep.steady, "replay_requests": rep.requests,
    "sla_met_share": rep.sla_met_share, "replayed_rate": rep.requests_per_s,
    "total_s": total,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def run(budget: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        code = CHILD.format(toolkit=str(REPO / "toolkit"), budget=budget, out=tmp)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=False, env=os.environ | {"DYN_LOG": "warn"})
    if done.returncode != 0:
        raise SystemExit(f"plan at {budget} GPUs failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="*", default=[1024, 4096])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    rows = [run(b) for b in args.budgets]
    for r in rows:
        print(f"{r['budget']:>5} GPUs: {r['plan']} ({r['requests_per_s']:.1f} req/s); search "
              f"{r['search_s']:.1f} s, one replay {r['replay_wall_s']:.1f} s "
              f"(replay/search {r['replay_wall_s'] / r['search_s']:.2f}), {r['replays']} "
              f"replay(s) in all; replayed {r['replayed']}; {r['replay_requests']} requests, "
              f"steady state: {r['steady']}, SLA met {r['sla_met_share']:.0%}, replayed "
              f"throughput {r['replayed_rate'] / r['requests_per_s'] - 1:+.1%} against the "
              f"plan; peak memory {r['peak_rss_mb']:.0f} MB")
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "plan_scale.json"
    target.write_text(json.dumps(rows, indent=2) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
