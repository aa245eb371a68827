"""`make bench`: every benchmark, one after another (they share 2 cores; never in parallel).

Each script prints its own table and writes JSON under benchmarks/results/; this runner only
sequences them and says which failed. Pass names to run a subset: `run_all.py bringup`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHMARKS = ["bringup", "footprint", "bench_overhead", "bench_fidelity", "autoscale",
              "plan_vs_aiconfigurator", "plan_scale", "workloads", "slurm_bringup",
              "top_scrape_cost", "tls_cost", "multinode"]


def main(names: list[str]) -> int:
    chosen = names or BENCHMARKS
    unknown = sorted(set(chosen) - set(BENCHMARKS))
    if unknown:
        print(f"unknown benchmark(s) {unknown}; choose from {BENCHMARKS}", file=sys.stderr)
        return 2
    failed = []
    for name in chosen:
        print(f"\n=== {name} ===", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(HERE / f"{name}.py")])
        print(f"=== {name}: exit {code} in {time.monotonic() - started:.0f} s ===", flush=True)
        if code:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
