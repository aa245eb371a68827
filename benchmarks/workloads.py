"""Real traffic shapes on the mocker: the KV-router A/B and the disaggregate-or-not verdict,
each one `dis-serve compare` command, with the figures the closing note of issue 12 asks for.

1. KV router vs round-robin: the aggregated demo graph (2 mocker workers) with a shared-prefix
   workload (benchmarks/shared-prefix-router.yaml) whose prefixes outgrow one worker's KV
   cache (`mocker.num_gpu_blocks` capped), `--vary router.mode=kv,round-robin --repeat N`.
   Prints TTFT p50 and the prefix-cache hit rate per arm, with the range over repetitions.
2. Aggregated vs disaggregated on the sample trace (benchmarks/trace.yaml): agg-mocker
   (2 workers) vs the demo graph (1 prefill + 1 decode), 2 GPUs each, `--repeat N`. Prints
   the goodput-per-GPU verdict by input-length bucket and the replay lag (requests sent vs
   the trace's timestamps, p99 and worst, over every run of both arms).

    python benchmarks/workloads.py [--reps 3] [--only router|verdict]

Graphs run on private ports (28800+). Writes benchmarks/results/workloads.json; the
reports and plots stay in the printed output directories.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from relocate import relocate

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 28800
# 16 prefixes of ~2,765 tokens are ~1,390 blocks of 32 tokens: one worker holds about two
# thirds of them, two workers all of them if each keeps its own share.
WORKER_BLOCKS = 1000


def topology(work: Path, source: str, name: str, **changes) -> Path:
    data = relocate(yaml.safe_load((REPO / "graphs" / source).read_text()), name, BASE_PORT)
    data.update(changes)
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def compare(work: Path, out: Path, *args) -> list[dict]:
    env = os.environ | {"DIS_SERVE_HOME": str(work / "home"), "COLUMNS": "160"}
    done = subprocess.run([DIS_SERVE, "compare", *map(str, args), "--out", str(out)],
                          env=env, check=False, capture_output=True, text=True)
    print(done.stdout[-6000:])
    if done.returncode:
        sys.exit(f"compare failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads((out / "compare.json").read_text())


def spread_of(values: list[float]) -> dict:
    return {"mean": sum(values) / len(values), "low": min(values), "high": max(values),
            "runs": len(values)}


def router_ab(work: Path, reps: int) -> dict:
    agg = topology(work, "agg-mocker.yaml", "wl-router",
                   mocker={"num_gpu_blocks": WORKER_BLOCKS})
    arms = compare(work, work / "router-ab", agg, "--vary", "router.mode=kv,round-robin",
                   "--repeat", reps, "--scenario",
                   REPO / "benchmarks" / "shared-prefix-router.yaml")
    figures = {}
    for arm in arms:
        points = [p for run in arm["runs"] for p in run["points"]]
        figures[arm["label"]] = {
            "ttft_p50_ms": spread_of([p["aiperf"]["ttft_ms"]["p50"] for p in points]),
            "prefix_cache_hit_pct": spread_of([p["aiperf"]["prefix_cache_hit_pct"]
                                               for p in points]),
            "request_throughput": spread_of([p["aiperf"]["request_throughput"]
                                             for p in points]),
        }
    print(f"{'arm':<26} {'TTFT p50 ms (range)':>26} {'hit rate % (range)':>26}")
    for label, f in figures.items():
        t, h = f["ttft_p50_ms"], f["prefix_cache_hit_pct"]
        print(f"{label:<26} {t['mean']:>10.1f} ({t['low']:.1f}-{t['high']:.1f}) "
              f"{h['mean']:>14.1f} ({h['low']:.1f}-{h['high']:.1f})")
    return {"report": str(work / "router-ab" / "compare.md"), "arms": figures}


def verdict(work: Path, reps: int) -> dict:
    agg = topology(work, "agg-mocker.yaml", "wl-agg")
    disagg = topology(work, "demo.yaml", "wl-disagg")
    arms = compare(work, work / "verdict", agg, disagg, "--repeat", reps,
                   "--scenario", REPO / "benchmarks" / "trace.yaml")
    lags = {}
    for arm in arms:
        for run in arm["runs"]:
            for p in run["points"]:
                if p["schedule_lag"]:
                    lags.setdefault(p["point"]["value"], []).append(p["schedule_lag"])
    lag = {f"speedup {k:g}": {"p99_ms": spread_of([x["p99_ms"] for x in v]),
                              "max_ms": max(x["max_ms"] for x in v), "runs": len(v)}
           for k, v in sorted(lags.items())}
    for name, figures in lag.items():
        p99 = figures["p99_ms"]
        print(f"replay lag at {name}: p99 {p99['mean']:.1f} ms ({p99['low']:.1f}-"
              f"{p99['high']:.1f}) over {figures['runs']} runs, worst {figures['max_ms']:.1f} ms")
    return {"report": str(work / "verdict" / "compare.md"), "replay_lag": lag,
            "goodput_per_gpu": {arm["label"]: [
                {"speedup": p["point"]["value"],
                 "buckets": {b["low"]: b["goodput_per_gpu"] for b in p["input_buckets"]}}
                for run in arm["runs"] for p in run["points"]] for arm in arms}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="Runs per arm (default 3).")
    parser.add_argument("--only", choices=("router", "verdict"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dis-serve-workloads-"))
    result = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "reps": args.reps}
    if args.only in (None, "router"):
        result["router_ab"] = router_ab(work, args.reps)
    if args.only in (None, "verdict"):
        result["agg_vs_disagg"] = verdict(work, args.reps)
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / "workloads.json"
    if args.only and saved.is_file():  # one half rerun: keep the other half's figures
        result = json.loads(saved.read_text()) | result
    saved.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS / 'workloads.json'}; reports under {work}")


if __name__ == "__main__":
    main()
