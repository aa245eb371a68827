"""What mutual TLS costs the serving path: the smoke sweep on the demo graph with
`security.tls.mode: auto` and with `off`, side by side in one run (issue 20).

One `dis-serve compare <demo> --vary security.tls.mode=auto,off --repeat N` on private ports
(28900+): the two arms are the same graph shape (1 prefill + 1 decode mocker, KV router) and
differ only in that key; every run brings up a fresh graph and the runs alternate (auto off
auto off ...) so a drift of the shared machine favours neither. In the auto arm etcd asks for
client certificates, NATS speaks TLS and the request plane (frontend -> workers) is TCP over
mutual TLS; the OpenAI endpoint is plain HTTP on loopback in both arms, so AIPerf's side is
identical. The load is benchmarks/smoke.yaml (concurrency 1 and 4) with fewer requests, so
the whole run fits in about six minutes on a 2-core machine.

Per arm and concurrency: the median over the rounds of req/s, TTFT p50 and ITL p50, each
arm's range over the rounds, the ratio off/on and TLS's cost (req/s lost, TTFT and ITL
added, relative to off). Target: TLS costs <= 5% of req/s and of TTFT p50 at every point;
the exit status says (1: missed). A cost inside the arms' run-to-run ranges is marked
"within spread": on a shared 2-core machine that spread can exceed the effect.

    python benchmarks/tls_cost.py [--rounds 3] [--requests 12] [--dry-run]

Writes benchmarks/results/tls_cost.json; the compare report (compare.md, plots) stays in the
printed output directory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from relocate import relocated_demo

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
SMOKE = REPO / "benchmarks" / "smoke.yaml"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 28900
TARGET_COST = 0.05
VARY_KEY = "security.tls.mode"
ON, OFF = "auto", "off"
# What each arm's rendered launch plan must (auto) or must not (off) carry, per plane: an
# etcd flag, or an environment variable of the Dynamo processes.
TLS_MARKS = {"etcd client-certificate auth": "--client-cert-auth",
             "NATS TLS": "NATS_TLS_CA_CERT_PATH",
             "request-plane mutual TLS": "DYN_TCP_TLS_CERT_PATH"}
# key in the AIPerf summary, percentile (None: a plain figure), whether higher is better.
FIGURES = {"req_s": ("request_throughput", None, True),
           "ttft_p50_ms": ("ttft_ms", "p50", False),
           "itl_p50_ms": ("itl_ms", "p50", False)}
JUDGED = ("req_s", "ttft_p50_ms")


def write_inputs(work: Path, requests: int, warmup: int) -> tuple[Path, Path]:
    """The demo topology on private ports, and the smoke scenario with `requests` per point."""
    topology = work / "tls-cost.yaml"
    topology.write_text(yaml.safe_dump(relocated_demo("tls-cost", BASE_PORT), sort_keys=False))
    smoke = yaml.safe_load(SMOKE.read_text())
    smoke.update(name="tls-cost", requests=requests, warmup_requests=warmup,
                 description=f"benchmarks/smoke.yaml with {requests} requests per point "
                             "(tls_cost.py)")
    scenario = work / "tls-cost-scenario.yaml"
    scenario.write_text(yaml.safe_dump(smoke, sort_keys=False))
    return topology, scenario


def plane_evidence(topology: Path) -> dict[str, dict[str, bool]]:
    """Per arm, which planes the rendered launch plan secures: the arms must differ in TLS
    and in nothing a client sees (same endpoint scheme, same processes)."""
    from dis_serve.bench.arms import vary_arms
    from dis_serve.launch.preflight import find_binaries
    from dis_serve.render.launch_plan import RenderContext, render_launch_plan

    evidence = {}
    for arm in vary_arms(topology, VARY_KEY, [ON, OFF]):
        binaries = find_binaries(arm.topology)
        plan = render_launch_plan(arm.topology, RenderContext(
            run_dir=Path("/nonexistent/tls-cost"), python=sys.executable,
            etcd_bin=binaries.etcd, nats_bin=binaries.nats))
        evidence[arm.label] = {plane: any(mark in spec.env or mark in spec.argv
                                          for spec in plan.processes)
                               for plane, mark in TLS_MARKS.items()}
        evidence[arm.label]["https endpoint"] = plan.endpoint.startswith("https:")
        evidence[arm.label]["processes"] = sorted(spec.name for spec in plan.processes)
    on, off = (evidence[f"{VARY_KEY}={v}"] for v in (ON, OFF))
    wrong = ([p for p in TLS_MARKS if not on[p]] + [p for p in TLS_MARKS if off[p]]
             + (["endpoint scheme"] if on["https endpoint"] != off["https endpoint"] else [])
             + (["processes"] if on["processes"] != off["processes"] else []))
    if wrong:
        raise SystemExit(f"the arms do not differ in TLS alone: {wrong}; {evidence}")
    return evidence


def compare_argv(work: Path, topology: Path, scenario: Path, rounds: int) -> list[str]:
    return [DIS_SERVE, "compare", str(topology), "--vary", f"{VARY_KEY}={ON},{OFF}",
            "--repeat", str(rounds), "--scenario", str(scenario), "--out", str(work / "compare")]


def run_compare(work: Path, argv: list[str]) -> tuple[list, Path]:
    out = work / "compare"
    print(f"$ {shlex.join(argv)}\n(output: {work / 'compare.log'})", flush=True)
    env = os.environ | {"DIS_SERVE_HOME": str(work / "home"), "COLUMNS": "160"}
    log = work / "compare.log"  # `tail -f` it to follow a run; its end is printed after
    with log.open("w") as sink:
        code = subprocess.call(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
    print(log.read_text()[-6000:])
    if code:
        raise SystemExit(f"compare failed ({code}); its output: {log}")
    return json.loads((out / "compare.json").read_text()), out


def figure(point: dict, name: str) -> float | None:
    key, percentile, _ = FIGURES[name]
    value = point["aiperf"][key]
    if percentile is not None:
        value = value[percentile] if value else None
    return value


def per_point(arms: list[dict]) -> dict[str, dict]:
    """concurrency -> arm -> figure -> runs, in round order."""
    table: dict[str, dict] = {}
    for arm in arms:
        mode = arm["label"].removeprefix(f"{VARY_KEY}=")
        for run in arm["runs"]:
            for point in run["points"]:
                where = table.setdefault(f"c{point['point']['value']:g}", {})
                mine = where.setdefault(mode, {name: [] for name in FIGURES} | {"errors": []})
                for name in FIGURES:
                    mine[name].append(figure(point, name))
                mine["errors"].append(point["aiperf"]["errors"])
    return table


def summarize(table: dict[str, dict]) -> dict[str, dict]:
    summary = {}
    for where, arms in table.items():
        row = {"errors": {mode: sum(arms[mode]["errors"]) for mode in (ON, OFF)}}
        for name, (_, _, higher_better) in FIGURES.items():
            runs = {mode: [v for v in arms[mode][name] if v is not None] for mode in (ON, OFF)}
            if not runs[ON] or not runs[OFF]:
                row[name] = None
                continue
            on, off = statistics.median(runs[ON]), statistics.median(runs[OFF])
            # TLS's cost relative to off: req/s lost, latency added (negative: TLS was faster).
            cost = (off - on) / off if higher_better else (on - off) / off
            overlap = (min(runs[ON]) <= max(runs[OFF])) and (min(runs[OFF]) <= max(runs[ON]))
            row[name] = {"median_on": on, "median_off": off, "ratio_off_on": off / on,
                         "tls_cost": cost, "range_on": [min(runs[ON]), max(runs[ON])],
                         "range_off": [min(runs[OFF]), max(runs[OFF])],
                         "within_spread": overlap, "runs": runs}
        row["meets_target"] = all(row[n] is not None and row[n]["tls_cost"] <= TARGET_COST
                                  for n in JUDGED)
        summary[where] = row
    return summary


def print_summary(summary: dict[str, dict]) -> None:
    print(f"{'point':<6} {'figure':<12} {'TLS auto (range)':>24} {'TLS off (range)':>24} "
          f"{'off/on':>7} {'TLS cost':>9}")
    for where, row in summary.items():
        for name in FIGURES:
            f = row[name]
            if f is None:
                print(f"{where:<6} {name:<12} {'no data':>24}")
                continue
            on = f"{f['median_on']:.2f} ({f['range_on'][0]:.2f}-{f['range_on'][1]:.2f})"
            off = f"{f['median_off']:.2f} ({f['range_off'][0]:.2f}-{f['range_off'][1]:.2f})"
            note = " within spread" if f["within_spread"] else ""
            print(f"{where:<6} {name:<12} {on:>24} {off:>24} {f['ratio_off_on']:>7.3f} "
                  f"{100 * f['tls_cost']:>+8.1f}%{note}")
        errors = row["errors"]
        print(f"{where:<6} {'errors':<12} {errors[ON]:>24} {errors[OFF]:>24}   "
              f"{'meets' if row['meets_target'] else 'MISSES'} the <= "
              f"{100 * TARGET_COST:.0f}% req/s and TTFT p50 target")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3,
                        help="Runs per arm, alternating auto/off (default 3).")
    parser.add_argument("--requests", type=int, default=12,
                        help="Requests per sweep point (smoke.yaml has 24; default 12).")
    parser.add_argument("--warmup", type=int, default=2,
                        help="Warm-up requests per point (default 2).")
    parser.add_argument("--dry-run", action="store_true",
                        help="Write and validate the inputs, check the arms' rendered planes, "
                             "print the compare command; start nothing.")
    args = parser.parse_args()
    if args.rounds < 1 or args.requests < 1 or args.warmup < 0:
        parser.error("--rounds and --requests must be >= 1, --warmup >= 0")

    work = Path(tempfile.mkdtemp(prefix="dis-serve-tls-cost-"))
    topology, scenario = write_inputs(work, args.requests, args.warmup)
    from dis_serve.bench.scenario import load_scenario

    load_scenario(scenario)
    evidence = plane_evidence(topology)
    for label, planes in evidence.items():
        secured = [p for p in TLS_MARKS if planes[p]] or ["nothing"]
        print(f"{label}: secures {', '.join(secured)}; endpoint "
              f"{'https' if planes['https endpoint'] else 'http'}")
    argv = compare_argv(work, topology, scenario, args.rounds)
    if args.dry_run:
        print(f"dry run: would run {args.rounds} round(s) of {ON}/{OFF} with "
              f"{args.requests} requests per point:\n$ {shlex.join(argv)}")
        shutil.rmtree(work)
        return 0

    started = time.monotonic()
    arms, out = run_compare(work, argv)
    wall = time.monotonic() - started
    summary = summarize(per_point(arms))
    print_summary(summary)
    meets = all(row["meets_target"] for row in summary.values())
    print(f"{args.rounds} round(s) per arm, {args.requests} requests per point, "
          f"{wall:.0f} s in all; report {out / 'compare.md'}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    saved = RESULTS / "tls_cost.json"
    saved.write_text(json.dumps({
        "benchmark": "tls_cost", "machine": platform.node(), "cpus": os.cpu_count(),
        "rounds": args.rounds, "requests": args.requests, "warmup_requests": args.warmup,
        "scenario": yaml.safe_load(scenario.read_text()), "planes": evidence,
        "wall_s": wall, "target_cost": TARGET_COST, "judged": list(JUDGED),
        "points": summary, "meets_target": meets, "report": str(out / "compare.md"),
    }, indent=2) + "\n")
    print(f"wrote {saved}")
    return 0 if meets else 1


if __name__ == "__main__":
    sys.exit(main())
