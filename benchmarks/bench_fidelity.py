"""Fidelity of `dis-serve bench`: the same sweep point through dis-serve and through a bare
`aiperf profile` on the same graph agree within run-to-run spread.

The demo graph runs on private ports (28700+). One point (concurrency 4, 48 requests of 128
tokens in / 32 out) is run alternately, several times each: through `dis-serve bench --url`
(fresh output directory every time, so nothing is reused) and through the plain AIPerf
command DESIGN.md gives (no seed, no ignore_eos, no worker metrics, no goodput). For TTFT,
ITL and end-to-end p50 and the two throughputs, the means of the two sides are compared with
the larger of the two sides' run-to-run ranges (max - min).

    python benchmarks/bench_fidelity.py [--reps 3]

Writes benchmarks/results/bench_fidelity.json.
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
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
AIPERF = str(Path(sys.executable).with_name("aiperf"))
BASE_PORT = 28700
CONCURRENCY, REQUESTS, ISL, OSL = 4, 48, 128, 32
SCENARIO = {
    "name": "fidelity",
    "input_tokens": {"mean": ISL},
    "output_tokens": {"mean": OSL},
    "requests": REQUESTS,
    "concurrency": [CONCURRENCY],
    "sla": {"ttft_ms": 500, "itl_ms": 50},
}
METRICS = (  # (name, how to read it from an AIPerf summary)
    ("TTFT p50 (ms)", lambda s: s.ttft_ms.p50),
    ("ITL p50 (ms)", lambda s: s.itl_ms.p50),
    ("E2E p50 (ms)", lambda s: s.e2e_ms.p50),
    ("requests/s", lambda s: s.request_throughput),
    ("output tokens/s", lambda s: s.output_token_throughput),
)


def demo_topology(work: Path) -> Path:
    from relocate import relocated_demo

    path = work / "topology.yaml"
    path.write_text(yaml.safe_dump(relocated_demo("bench-fidelity", BASE_PORT), sort_keys=False))
    return path


def via_dis_serve(work: Path, home: Path, url: str, topology: Path, scenario: Path, rep: int):
    from dis_serve.bench.aiperf_export import read_export

    out = work / f"dis-serve-{rep}"
    done = subprocess.run([DIS_SERVE, "bench", "--scenario", str(scenario), "--url", url,
                           "--topology", str(topology), "--out", str(out)],
                          capture_output=True, text=True, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)})
    if done.returncode != 0:
        raise SystemExit(f"dis-serve bench failed:\n{done.stdout}\n{done.stderr}")
    return read_export(out / "points" / f"concurrency-{CONCURRENCY}" /
                       "profile_export_aiperf.json")


def via_bare_aiperf(work: Path, url: str, model: str, tokenizer: str, rep: int):
    from dis_serve.bench.aiperf_export import read_export

    out = work / f"bare-{rep}"
    done = subprocess.run([AIPERF, "profile", "--model", model, "--url", url,
                           "--endpoint-type", "chat", "--streaming", "--tokenizer", tokenizer,
                           "--concurrency", str(CONCURRENCY), "--request-count", str(REQUESTS),
                           "--synthetic-input-tokens-mean", str(ISL),
                           "--output-tokens-mean", str(OSL), "--ui-type", "none",
                           "--artifact-dir", str(out)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"aiperf failed:\n{done.stdout[-3000:]}")
    return read_export(out / "profile_export_aiperf.json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=3, help="Runs per side (default 3).")
    args = parser.parse_args()

    from dis_serve.inputs.yaml_input import load_model_file
    from dis_serve.launch.graph import start_graph
    from dis_serve.topology import Topology

    ours, bare = [], []
    with tempfile.TemporaryDirectory(prefix="dis-serve-fidelity-") as tmp:
        work = Path(tmp)
        home = work / "home"
        topology = demo_topology(work)
        scenario = work / "scenario.yaml"
        scenario.write_text(yaml.safe_dump(SCENARIO, sort_keys=False))
        with start_graph(load_model_file(Topology, topology), run_root=home) as graph:
            for rep in range(args.reps):  # alternate, so drift hits both sides alike
                ours.append(via_dis_serve(work, home, graph.endpoint, topology, scenario, rep))
                bare.append(via_bare_aiperf(work, graph.endpoint, graph.model_name,
                                            graph.plan.model_path, rep))

    rows = []
    print(f"{'metric':<16} {'dis-serve mean [min-max]':>28} {'bare aiperf mean [min-max]':>28} "
          f"{'diff':>7} {'spread':>7}  agree")
    for name, read in METRICS:
        a, b = [read(s) for s in ours], [read(s) for s in bare]
        diff = abs(statistics.mean(a) - statistics.mean(b))
        spread = max(max(a) - min(a), max(b) - min(b))
        agree = diff <= spread
        base = statistics.mean(b)
        rows.append({"metric": name, "dis_serve": a, "bare_aiperf": b,
                     "diff_of_means": diff, "run_to_run_spread": spread, "agree": agree})
        print(f"{name:<16} {statistics.mean(a):>10.2f} [{min(a):>6.2f}-{max(a):>6.2f}] "
              f"{statistics.mean(b):>10.2f} [{min(b):>6.2f}-{max(b):>6.2f}] "
              f"{100 * diff / base:>6.1f}% {100 * spread / base:>6.1f}%  "
              f"{'yes' if agree else 'NO'}")
    agreed = sum(r["agree"] for r in rows)
    print(f"{agreed}/{len(rows)} metrics agree within run-to-run spread "
          f"({args.reps} runs per side, alternating)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bench_fidelity.json"
    out.write_text(json.dumps({
        "benchmark": "bench_fidelity", "machine": platform.node(), "cpus": os.cpu_count(),
        "point": {"concurrency": CONCURRENCY, "requests": REQUESTS, "isl": ISL, "osl": OSL},
        "reps": args.reps, "metrics": rows, "all_agree": agreed == len(rows),
    }, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
