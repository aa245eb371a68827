"""Orchestration overhead of `dis-serve bench`: a 4-point sweep's wall time against the sum of
AIPerf's own durations.

The demo graph runs on private ports (28600+). `dis-serve bench --url` is run as a user runs
it (interpreter start, imports, endpoint check, one AIPerf process per point, progress
polling, result files, Markdown report and both PNG plots); its wall clock is compared with
the sum of the wall times of the `aiperf profile` processes it ran (each measured around the
process, recorded in results.json). Overhead = (dis-serve wall - sum of AIPerf walls) / sum of
AIPerf walls; target <= 10%. AIPerf's own measurement windows (benchmark_duration) are shown
too: the rest of each AIPerf wall is AIPerf's start-up and shutdown, not dis-serve's.

    python benchmarks/bench_overhead.py [--reps 2]

Writes benchmarks/results/bench_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 28600
TARGET_OVERHEAD = 0.10
SCENARIO = {
    "name": "overhead",
    "description": "4-point sweep for the orchestration-overhead benchmark.",
    "input_tokens": {"mean": 128, "stddev": 16},
    "output_tokens": {"mean": 32},
    "requests": 24,
    "warmup_requests": 4,
    "concurrency": [1, 2, 4, 8],
    "sla": {"ttft_ms": 500, "itl_ms": 50},
}


def demo_topology(work: Path) -> Path:
    from relocate import relocated_demo

    path = work / "topology.yaml"
    path.write_text(yaml.safe_dump(relocated_demo("bench-overhead", BASE_PORT), sort_keys=False))
    return path


def one_sweep(work: Path, home: Path, url: str, topology: Path, scenario: Path,
              rep: int) -> dict:
    out = work / f"sweep-{rep}"
    start = time.monotonic()
    done = subprocess.run([DIS_SERVE, "bench", "--scenario", str(scenario), "--url", url,
                           "--topology", str(topology), "--out", str(out)],
                          capture_output=True, text=True, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)})
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise SystemExit(f"dis-serve bench failed:\n{done.stdout}\n{done.stderr}")
    result = json.loads((out / "results.json").read_text())
    aiperf_walls = [p["aiperf_wall_s"] for p in result["points"]]
    measured = [p["aiperf"]["duration_s"] for p in result["points"]]
    return {
        "dis_serve_wall_s": wall,
        "aiperf_wall_sum_s": sum(aiperf_walls),
        "aiperf_measurement_sum_s": sum(measured),
        "sweep_wall_s": result["sweep_wall_s"],
        "points": len(aiperf_walls),
        "overhead": (wall - sum(aiperf_walls)) / sum(aiperf_walls),
        "sweep_overhead": (result["sweep_wall_s"] - sum(aiperf_walls)) / sum(aiperf_walls),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2, help="Sweeps to run (default 2).")
    args = parser.parse_args()

    from dis_serve.inputs.yaml_input import load_model_file
    from dis_serve.launch.graph import start_graph
    from dis_serve.topology import Topology

    with tempfile.TemporaryDirectory(prefix="dis-serve-overhead-") as tmp:
        work = Path(tmp)
        home = work / "home"
        topology = demo_topology(work)
        scenario = work / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(SCENARIO, sort_keys=False))
        with start_graph(load_model_file(Topology, topology), run_root=home) as graph:
            sweeps = [one_sweep(work, home, graph.endpoint, topology, scenario, rep)
                      for rep in range(args.reps)]

    print(f"{'rep':>3} {'points':>6} {'dis-serve wall':>15} {'sum AIPerf walls':>17} "
          f"{'sum AIPerf measured':>20} {'overhead':>9} {'in-sweep':>9}")
    for i, s in enumerate(sweeps):
        print(f"{i:>3} {s['points']:>6} {s['dis_serve_wall_s']:>14.2f}s "
              f"{s['aiperf_wall_sum_s']:>16.2f}s {s['aiperf_measurement_sum_s']:>19.2f}s "
              f"{100 * s['overhead']:>8.1f}% {100 * s['sweep_overhead']:>8.1f}%")
    median = statistics.median(s["overhead"] for s in sweeps)
    verdict = "meets" if median <= TARGET_OVERHEAD else "MISSES"
    print(f"median overhead {100 * median:.1f}% ({verdict} the <= "
          f"{100 * TARGET_OVERHEAD:.0f}% target); 'in-sweep' excludes interpreter start, "
          "imports and the report")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_overhead.json"
    out.write_text(json.dumps({
        "benchmark": "bench_overhead", "machine": platform.node(), "cpus": os.cpu_count(),
        "scenario": SCENARIO, "sweeps": sweeps, "median_overhead": median,
        "target_overhead": TARGET_OVERHEAD, "meets_target": median <= TARGET_OVERHEAD,
    }, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
