"""Autoscale: one trace whose load changes, replayed on three mocker graphs side by side.

The trace (Mooncake JSONL, written here; AIPerf replays it on its timestamps through
`dis-serve bench --url`) has four phases of --phase-s seconds each: long prompts (3,000 in,
32 out: prefill-bound), long answers (128 in, 400 out: decode-bound), a surge of both at 3x
the rate, then quiet (a quarter of the rate, short requests). Arms, one after the other in
one run, each its own graph (ports 28600+), its mocker with a KV cache of 8,192 tokens per
worker (num_gpu_blocks 256), so decode load shows in the KV cache as it would on an H100
holding a 70B model's cache:

- mean: the static split for the mean load, 1 prefill + 1 decode worker;
- peak: the static split sized for the surge, 2 prefill + 3 decode;
- planner: Dynamo 1.6.1's planner (`autoscale`, target load, its default thresholds:
  decode KV 50 % up / 10 % down, a prefill queue of one forward pass up), from 1 + 1
  between min_workers 1 and the peak arm's ceilings (max_workers 2 and 3).

Per arm: SLA attainment (requests with TTFT <= --ttft-ms and ITL <= --itl-ms, of all sent),
failed requests (AIPerf's errors) and truncated ones (fewer output tokens than asked),
GPU-seconds (each running worker process's GPUs, sampled every 0.5 s from the supervisor's
state over the replay; a draining worker still counts), and for the planner arm each
change's decision-to-serving time (the run directory's changes.jsonl: from the step's write
to every new worker ready and routed). Targets (issue 28): the planner arm meets the SLA for
>= 90 % of requests with 0 failed through every scale event, and uses >= 25 % fewer
GPU-seconds than the peak arm. Everything goes to benchmarks/results/autoscale.json.

Takes /tmp/ds-integration.lock for the run (real processes, fixed ports).

    python benchmarks/autoscale.py [--phase-s 40] [--rate 2] [--ttft-ms 1000] [--itl-ms 50]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 28600
LOCK = "/tmp/ds-integration.lock"
BLOCK = 512
sys.path.insert(0, str(REPO / "benchmarks"))

from relocate import relocated_demo  # noqa: E402

ARMS = {"mean": {"prefill": 1, "decode": 1}, "peak": {"prefill": 2, "decode": 3},
        "planner": {"prefill": 1, "decode": 1}}


def phases(rate: float, phase_s: float) -> list[tuple[str, float, list[tuple[int, int]]]]:
    """(name, requests per second, the (input, output) lengths it cycles through)."""
    long_prompt, long_answer, short = (3000, 32), (128, 400), (120, 32)  # inputs tell them apart
    return [("long prompts", rate, [long_prompt]), ("long answers", rate, [long_answer]),
            ("surge", 3 * rate, [long_prompt, long_answer]), ("quiet", rate / 4, [short])]


def write_trace(path: Path, rate: float, phase_s: float) -> list[dict]:
    """Evenly spaced arrivals per phase; every request's blocks its own (no prefix reuse)."""
    rows, start, block = [], 0.0, 0
    for _name, phase_rate, shapes in phases(rate, phase_s):
        count = int(phase_rate * phase_s)
        for i in range(count):
            isl, osl = shapes[i % len(shapes)]
            blocks = math.ceil(isl / BLOCK)
            rows.append({"timestamp": int(1000 * (start + i / phase_rate)),
                         "input_length": isl, "output_length": osl,
                         "hash_ids": list(range(block, block + blocks))})
            block += blocks
        start += phase_s
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def topology(arm: str, work: Path) -> Path:
    data = relocated_demo(f"autoscale-{arm}", BASE_PORT + 30 * list(ARMS).index(arm))
    data["mocker"] = {"num_gpu_blocks": 256}
    data["model"]["max_input_tokens"] = 3072
    for role, count in ARMS[arm].items():
        data["pools"][role]["workers"] = count
    if arm == "planner":
        data["pools"]["prefill"]["max_workers"] = ARMS["peak"]["prefill"]
        data["pools"]["decode"]["max_workers"] = ARMS["peak"]["decode"]
        # The planner's and the scaler's ports above the workers' (relocate's block).
        data["autoscale"] = {"load_interval_s": 2,
                             "system_port": BASE_PORT + 30 * 2 + 20}
    path = work / f"{arm}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def scenario(work: Path, trace: Path, ttft_ms: float, itl_ms: float) -> Path:
    path = work / "scenario.yaml"
    path.write_text(yaml.safe_dump({
        "name": "autoscale", "description": "four phases: prompts, answers, surge, quiet",
        "trace": {"file": str(trace), "block_size": BLOCK, "speedup": [1]},
        "sla": {"ttft_ms": ttft_ms, "itl_ms": itl_ms}}))
    return path


def cli(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ | {"DIS_SERVE_HOME": str(home)},
                          check=False)


class GpuMeter:
    """GPU-seconds of running worker processes (all TP1 here), from the state file."""

    def __init__(self, state_file: Path) -> None:
        self.state_file, self.samples = state_file, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        alive = ("starting", "ready", "unhealthy", "draining", "stopping")
        while not self._stop.wait(0.5):
            try:
                state = json.loads(self.state_file.read_text())
            except (OSError, ValueError):
                continue
            gpus = sum(1 for p in state["processes"]
                       if p["kind"] == "worker" and p["state"] in alive)
            self.samples.append((time.monotonic(), gpus))

    def __enter__(self) -> GpuMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def gpu_seconds(self) -> float:
        return sum(g * (t2 - t1) for (t1, g), (t2, _) in zip(self.samples, self.samples[1:],
                                                             strict=False))


def wait_planner(run: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = json.loads((run / "state.json").read_text())
        except (OSError, ValueError):
            state = {"processes": []}
        if any(p["name"] == "planner" and p["state"] == "ready" for p in state["processes"]):
            return
        time.sleep(1)
    raise RuntimeError("the planner was not ready in time")


def figures(bench_out: Path, rows: list[dict], ttft_ms: float, itl_ms: float) -> dict:
    from dis_serve.bench.requests import read_records

    (records_file,) = sorted(bench_out.rglob("profile_export.jsonl"))
    records = read_records(records_file)
    asked = {r["input_length"]: r["output_length"] for r in rows}
    met = sum(1 for r in records if not r.failed and r.ttft_ms is not None
              and r.ttft_ms <= ttft_ms and (r.itl_ms is None or r.itl_ms <= itl_ms))
    truncated = sum(1 for r in records if not r.failed and r.output_tokens is not None
                    and r.output_tokens < asked.get(r.input_tokens, 0))
    return {"requests": len(records), "sla_attainment": round(met / max(len(records), 1), 4),
            "failed": sum(1 for r in records if r.failed), "truncated": truncated,
            "by_input": by_input(records, ttft_ms, itl_ms)}


def by_input(records: list, ttft_ms: float, itl_ms: float) -> dict[str, dict]:
    """Per request shape (input length): TTFT and ITL medians and 90th percentiles, and the
    share meeting each target (what misses, and why)."""
    out = {}
    for isl in sorted({r.input_tokens for r in records}):
        mine = [r for r in records if r.input_tokens == isl and not r.failed]
        ttfts = sorted(r.ttft_ms for r in mine if r.ttft_ms is not None)
        itls = sorted(r.itl_ms for r in mine if r.itl_ms is not None)

        def pct(values: list[float], q: float) -> float | None:
            return round(values[min(len(values) - 1, int(q * len(values)))], 1) if values else None
        out[str(isl)] = {"requests": len(mine), "ttft_p50_ms": pct(ttfts, 0.5),
                         "ttft_p90_ms": pct(ttfts, 0.9), "itl_p50_ms": pct(itls, 0.5),
                         "itl_p90_ms": pct(itls, 0.9),
                         "ttft_met": round(sum(t <= ttft_ms for t in ttfts) / max(len(mine), 1), 3),
                         "itl_met": round(sum(i <= itl_ms for i in itls) / max(len(mine), 1), 3)}
    return out


def run_arm(arm: str, work: Path, scenario_file: Path, rows: list[dict], args) -> dict:
    home = work / "home"
    file = topology(arm, work)
    up = cli(home, "up", str(file), "--detach")
    if up.returncode:
        raise RuntimeError(f"{arm}: up failed: {up.stderr}")
    run = home / "runs" / f"autoscale-{arm}"
    try:
        if arm == "planner":
            wait_planner(run)
        endpoint = json.loads((run / "state.json").read_text())["endpoint"]
        out = work / f"bench-{arm}"
        with GpuMeter(run / "state.json") as meter:
            bench = cli(home, "bench", "--url", endpoint, "--topology", str(file),
                        "--scenario", str(scenario_file), "--out", str(out))
        if bench.returncode:
            raise RuntimeError(f"{arm}: bench failed: {bench.stdout[-2000:]}{bench.stderr}")
        found = figures(out, rows, args.ttft_ms, args.itl_ms)
        found["gpu_seconds"] = round(meter.gpu_seconds(), 1)
        found["changes"] = changes(run)
        found["planner_uss_mib"] = planner_memory(run)
        return found
    finally:
        cli(home, "down", f"autoscale-{arm}")


def planner_memory(run: Path) -> dict[str, float]:
    """Unique memory (USS, MiB) of the planner and the scaler, after the replay: what
    preflight's memory check counts per process (launch/preflight.py)."""
    import psutil

    found = {}
    for proc in json.loads((run / "state.json").read_text())["processes"]:
        if proc["kind"] == "planner" and proc.get("pid"):
            try:
                found[proc["name"]] = round(
                    psutil.Process(proc["pid"]).memory_full_info().uss / 2**20, 1)
            except psutil.Error:
                continue
    return found


def changes(run: Path) -> list[dict]:
    from dis_serve.launch.change_record import read_history

    return [{"source": c.source, "target": c.target, "state": c.state.value,
             "decision_to_serving_s": [round(s.took_s, 2) for s in c.steps
                                       if s.added and s.took_s is not None],
             "drain_s": [round(s.took_s, 2) for s in c.steps
                         if s.removed and not s.added and s.took_s is not None]}
            for c in read_history(run)]


def verdict(arms: dict[str, dict]) -> dict:
    planner, peak = arms["planner"], arms["peak"]
    saved = 1 - planner["gpu_seconds"] / peak["gpu_seconds"]
    serving = [t for c in planner["changes"] for t in c["decision_to_serving_s"]]
    return {"planner_sla_attainment": planner["sla_attainment"],
            "planner_failed": planner["failed"], "planner_truncated": planner["truncated"],
            "gpu_seconds_saved_vs_peak": round(saved, 4),
            "decision_to_serving_s_median": statistics.median(serving) if serving else None,
            "decision_to_serving_s_max": max(serving) if serving else None,
            "targets_met": {"sla_90": planner["sla_attainment"] >= 0.9,
                            "zero_failed": planner["failed"] == 0,
                            "gpu_seconds_25_percent_fewer": saved >= 0.25}}


def print_table(arms: dict[str, dict], summary: dict) -> None:
    print(f"{'arm':8} {'requests':>8} {'SLA met':>8} {'failed':>6} {'trunc':>6} "
          f"{'GPU-s':>7} {'changes':>7}")
    for name, a in arms.items():
        print(f"{name:8} {a['requests']:>8} {a['sla_attainment']:>8.1%} {a['failed']:>6} "
              f"{a['truncated']:>6} {a['gpu_seconds']:>7.1f} {len(a['changes']):>7}")
    print(json.dumps(summary, indent=2))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--phase-s", type=float, default=40.0)
    parser.add_argument("--rate", type=float, default=2.0, help="Requests/s outside the surge.")
    parser.add_argument("--ttft-ms", type=float, default=1000.0)
    parser.add_argument("--itl-ms", type=float, default=50.0)
    args = parser.parse_args()
    with open(LOCK, "w") as lock, tempfile.TemporaryDirectory(prefix="autoscale-") as tmp:
        fcntl.flock(lock, fcntl.LOCK_EX)
        work = Path(tmp)
        rows = write_trace(work / "trace.jsonl", args.rate, args.phase_s)
        scenario_file = scenario(work, work / "trace.jsonl", args.ttft_ms, args.itl_ms)
        arms = {arm: run_arm(arm, work, scenario_file, rows, args) for arm in ARMS}
    summary = verdict(arms)
    print_table(arms, summary)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "autoscale.json").write_text(json.dumps(
        {"args": vars(args), "trace_requests": len(rows), "arms": arms, "summary": summary},
        indent=2) + "\n")
    return 0 if all(summary["targets_met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
