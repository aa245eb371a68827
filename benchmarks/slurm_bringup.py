"""Slurm bring-up: `dis-serve up` of the demo graph with placement slurm against the same graph
started locally by `up`, side by side, on a real single-node Slurm started for the run.

Both sides are `dis-serve up FILE --detach` as a user runs it, timed from the command's start
until it returns ready (every process probed, the router sees every worker). The Slurm side
includes sbatch, the scheduler, srun steps and the probes through the run directory; the
scheduler's own share (squeue's SubmitTime to StartTime, whole seconds) is reported apart.
The two alternate for several repetitions; medians and the ratio go to
benchmarks/results/slurm_bringup.json. Needs root (it starts slurmctld, slurmd, munged).

    python benchmarks/slurm_bringup.py [--reps 5]
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
LOCAL_BASE, SLURM_BASE = 18600, 18650
TARGET_RATIO = 1.5
sys.path.insert(0, str(REPO / "tests"))  # the Slurm cluster the tests use


def _topology(work: Path, source: str, name: str, base: int) -> Path:
    from relocate import relocate

    data = relocate(yaml.safe_load((REPO / "graphs" / source).read_text()), name, base)
    if "placement" in data:  # on this machine's loopback, whatever the host name resolves to
        data["placement"]["slurm"]["interface"] = "lo"
    path = work / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _up(env: dict[str, str], topology: Path, name: str) -> float:
    started = time.monotonic()
    up = subprocess.run([DIS_SERVE, "up", str(topology), "--detach"], env=env,
                        capture_output=True, text=True, check=False)
    took = time.monotonic() - started
    if up.returncode != 0:
        subprocess.run([DIS_SERVE, "down", name], env=env, capture_output=True, check=False)
        raise SystemExit(f"dis-serve up {name} failed:\n{up.stdout}\n{up.stderr}")
    return took


def _scheduler_s(home: Path, name: str) -> tuple[float, float | None]:
    """The scheduler's share of a Slurm bring-up: sbatch returning to the batch script
    starting (the job's own clock mark), and squeue's SubmitTime to StartTime (whole s)."""
    from dis_serve.launch.rundir import RunDir
    from dis_serve.placements.slurm.queue import job_state, read_job
    from dis_serve.placements.slurm.submit import job_started_at

    run = RunDir.for_graph(name, home)
    job = read_job(run)
    started = job_started_at(run)
    assert job is not None and started is not None
    return started - job.submitted_at, job_state(job.job_id).queued_s


def _down(env: dict[str, str], name: str) -> None:
    subprocess.run([DIS_SERVE, "down", name], env=env, capture_output=True, check=True)


def measure(work: Path, env: dict[str, str], reps: int) -> dict[str, list[float]]:
    local = _topology(work, "demo.yaml", "bench-local", LOCAL_BASE)
    slurm = _topology(work, "demo-slurm.yaml", "bench-slurm", SLURM_BASE)
    home = work / "home"
    env = env | {"DIS_SERVE_HOME": str(home)}
    rows: dict[str, list[float]] = {"local": [], "slurm": [], "to_start": [],
                                    "after_start": [], "squeue_queued": []}
    _up(env, local, "bench-local")  # warm-up: page cache, model card, imports
    _down(env, "bench-local")
    for rep in range(reps):
        order = ("local", "slurm") if rep % 2 == 0 else ("slurm", "local")
        for label in order:
            name = f"bench-{label}"
            took = _up(env, local if label == "local" else slurm, name)
            rows[label].append(took)
            shown = f"{label}: ready after {took:.2f} s"
            if label == "slurm":
                to_start, queued = _scheduler_s(home, name)
                rows["to_start"].append(to_start)
                rows["after_start"].append(took - to_start)
                rows["squeue_queued"].append(queued if queued is not None else float("nan"))
                shown += f" (sbatch to job start {to_start:.2f} s; squeue queued {queued} s)"
            _down(env, name)
            print(f"rep {rep + 1}/{reps} {shown}", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    from slurm_cluster import SlurmCluster, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"cannot start a Slurm cluster here: {reason}")
    with tempfile.TemporaryDirectory(prefix="slurm-bringup-") as tmp:
        work = Path(tmp)
        with SlurmCluster.start(work / "slurm") as cluster:
            os.environ["SLURM_CONF"] = str(cluster.conf)  # for squeue from this process
            rows = measure(work, cluster.env, args.reps)
    medians = {k: statistics.median(v) for k, v in rows.items()}
    ratio = medians["slurm"] / medians["local"]
    without = medians["after_start"] / medians["local"]
    print(f"\nmedian of {args.reps}: local up {medians['local']:.2f} s, slurm up "
          f"{medians['slurm']:.2f} s; ratio {ratio:.2f}x (target {TARGET_RATIO}x)\n"
          f"  scheduler: sbatch to job start {medians['to_start']:.2f} s (squeue SubmitTime "
          f"to StartTime {medians['squeue_queued']:.0f} s, whole seconds)\n"
          f"  from job start to ready: {medians['after_start']:.2f} s = {without:.2f}x local")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "slurm_bringup.json"
    out.write_text(json.dumps({
        "reps": args.reps, "seconds": rows, "medians": medians, "ratio": ratio,
        "ratio_from_job_start": without, "target_ratio": TARGET_RATIO,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
