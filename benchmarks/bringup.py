"""Bring-up: `dis-serve up --detach` of the demo graph against the same processes started bare.

Both sides start the same argv and environment (the rendered launch plan of the demo graph,
on ports 18400+): etcd, NATS, the frontend with the KV router, one prefill and one decode
mocker. Bare: a bash script spawns them (etcd and NATS first, until their ports accept, then
the rest at once) and curls until a chat completion answers: that is its "ready". dis-serve:
the CLI as a user runs it (interpreter start, imports, preflight, model card, the detached
supervisor, its readiness probes) until `up` returns ready; then, for the stricter figure,
until a first chat completion answers too. Both clocks start when the command starts. The
two alternate for several repetitions in one run; medians and ratios are printed and written
to benchmarks/results/bringup.json.

    python benchmarks/bringup.py [--reps 7]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 18400
TARGET_RATIO = 1.1  # issue 17, item 9


def demo_topology(name: str) -> dict:
    from relocate import relocated_demo

    topo = relocated_demo(name, BASE_PORT)
    # Like for like: the bare script cannot hand Dynamo the graph's certificates (they reach
    # it through the supervisor's environment), so both arms run without TLS; its cost on the
    # serving path is benchmarks/tls_cost.py's.
    topo["security"] = {"tls": {"mode": "off"}}
    return topo


def first_completion(endpoint: str, model: str, deadline: float) -> None:
    from dis_serve.security.http_client import direct_client

    body = {"model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "w3"}]}
    with direct_client(5) as client:
        while time.monotonic() < deadline:
            try:
                if client.post(f"{endpoint}/v1/chat/completions", json=body).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.02)
    raise SystemExit("no completion before the deadline")


def tcp_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def bare_script(work: Path) -> Path:
    """A bash script that starts the plan's processes the way a person would: etcd and NATS,
    wait for their ports, then the frontend and the workers, then curl until a completion
    answers. Same argv and environment as under dis-serve; no supervisor, no health probes."""
    from dis_serve.launch.model_card import write_model_card
    from dis_serve.launch.preflight import find_binaries
    from dis_serve.render.launch_plan import RenderContext, render_launch_plan
    from dis_serve.topology import Topology

    topo = Topology.model_validate(demo_topology("bench-bare"))
    binaries = find_binaries(topo)
    run_dir = work / "bare"
    plan = render_launch_plan(topo, RenderContext(
        run_dir=run_dir, python=sys.executable, etcd_bin=binaries.etcd, nats_bin=binaries.nats))
    write_model_card(Path(plan.model_path), topo.model.resolved_architecture(), name="bench")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    lines = ["#!/usr/bin/env bash", "set -u",
             f"rm -rf {run_dir / 'etcd-data'} {run_dir / 'nats-data'}"]
    for spec in plan.processes:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env.items())
        command = " ".join(shlex.quote(a) for a in spec.argv)
        lines.append(f"env {env} {command} >{run_dir / 'logs' / spec.name}.log 2>&1 &")
        if spec.kind.value in ("etcd", "nats"):
            for port in spec.ports.values():
                lines.append(f"until (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null; "
                             "do sleep 0.01; done")
    body = json.dumps({"model": plan.model_name, "max_tokens": 4,
                       "messages": [{"role": "user", "content": "w3"}]})
    # Bounded (60 s): a graph that never serves ends the run instead of hanging it.
    lines += ["for _ in $(seq 3000); do",
              f"  curl -sf -o /dev/null {plan.endpoint}/v1/chat/completions "
              f"-H 'Content-Type: application/json' -d {shlex.quote(body)} && "
              "{ echo SERVED; wait; exit 0; }",
              "  sleep 0.02", "done", "echo 'not served in 60 s' >&2; exit 1"]
    script = work / "bare.sh"
    script.write_text("\n".join(lines) + "\n")
    return script


def run_bare(script: Path) -> float:
    """Seconds from starting the script until it has served a completion."""
    started = time.monotonic()
    proc = subprocess.Popen(["bash", str(script)], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "SERVED":
                return time.monotonic() - started
        raise SystemExit(f"the bare script exited ({proc.wait()}) without serving")
    finally:
        # The script and everything it started share its process group.
        os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while _group_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _group_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return any(p.info["status"] != "zombie" for p in psutil.process_iter(["status"])
               if _pgid(p.pid) == pgid)


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def run_dis_serve(work: Path) -> tuple[float, float, float]:
    """`dis-serve up --detach`: seconds to `up` returning (ready), to the first completion
    after that, and the supervisor's own spawn-to-ready."""
    topo_file = work / "bench-up.yaml"
    topo_file.write_text(yaml.safe_dump(demo_topology("bench-up")))
    env = os.environ | {"DIS_SERVE_HOME": str(work / "home")}
    started = time.monotonic()
    up = subprocess.run([DIS_SERVE, "up", str(topo_file), "--detach"], env=env,
                        capture_output=True, text=True, check=False)
    returned = time.monotonic() - started
    try:
        if up.returncode != 0:
            raise SystemExit(f"dis-serve up failed:\n{up.stderr}")
        first_completion(f"http://127.0.0.1:{BASE_PORT}", "demo-model", started + 120)
        served = time.monotonic() - started
        state = json.loads((work / "home" / "runs" / "bench-up" / "state.json").read_text())
        return returned, served, state["ready_after_s"]
    finally:
        subprocess.run([DIS_SERVE, "down", "bench-up"], env=env, capture_output=True,
                       check=False)


def wait_ports_free() -> None:
    ports = [BASE_PORT, BASE_PORT + 1, BASE_PORT + 2, BASE_PORT + 3, BASE_PORT + 10,
             BASE_PORT + 11]
    deadline = time.monotonic() + 20
    while any(tcp_open(p) for p in ports) and time.monotonic() < deadline:
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"bare": [], "up": [], "up_served": [], "supervised": []}
    with tempfile.TemporaryDirectory(prefix="bringup-") as tmp:
        work = Path(tmp)
        script = bare_script(work)
        run_bare(script)  # warm-up: page cache, Dynamo's model-card cache
        wait_ports_free()
        for rep in range(args.reps):
            # Alternate which goes first, so neither always inherits a warmer machine.
            order = ("bare", "dis-serve") if rep % 2 == 0 else ("dis-serve", "bare")
            for label in order:
                if label == "bare":
                    rows["bare"].append(run_bare(script))
                    shown = f"served after {rows['bare'][-1]:.2f} s"
                else:
                    returned, served, supervised = run_dis_serve(work)
                    rows["up"].append(returned)
                    rows["up_served"].append(served)
                    rows["supervised"].append(supervised)
                    shown = (f"ready after {returned:.2f} s, served after {served:.2f} s "
                             f"(supervisor spawn-to-ready {supervised:.2f} s)")
                wait_ports_free()
                print(f"rep {rep + 1} {label:10s} {shown}", flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    ratio_ready = med["up"] / med["bare"]
    ratio_served = med["up_served"] / med["bare"]
    print()
    print(f"{'':48s}{'median s':>9s}{'min s':>8s}{'max s':>8s}")
    for key, label in (("bare", "bare script: start -> first completion"),
                       ("up", "dis-serve up --detach: start -> ready (returns)"),
                       ("up_served", "dis-serve up --detach: start -> first completion"),
                       ("supervised", "  of which supervisor first spawn -> ready")):
        values = rows[key]
        print(f"{label:48s}{med[key]:9.2f}{min(values):8.2f}{max(values):8.2f}")
    for name, ratio in (("until ready", ratio_ready), ("until first completion", ratio_served)):
        verdict = "meets" if ratio <= TARGET_RATIO else "misses"
        print(f"ratio dis-serve/bare, {name}: {ratio:.2f} ({verdict} the target <= "
              f"{TARGET_RATIO})")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "bringup.json"
    out.write_text(json.dumps({
        "what": "demo graph bring-up: bare bash script (start -> first completion) vs "
                "`dis-serve up --detach` (start -> ready, and -> first completion)",
        "reps": args.reps, "seconds": rows, "medians": med,
        "ratio_until_ready": ratio_ready, "ratio_until_first_completion": ratio_served,
        "target_ratio": TARGET_RATIO,
        # Where Python may not write bytecode (PYTHONDONTWRITEBYTECODE) and none was compiled
        # beforehand (make install does), every CLI start compiles dis-serve's modules again.
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "writes_bytecode": not sys.flags.dont_write_bytecode,
                    "load_avg_1m_at_end": os.getloadavg()[0]},
    }, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
