"""Footprint: the supervisor's memory while the demo graph serves, what the graph listens on,
and what the light commands import.

1. `dis-serve up --detach` of the demo graph (ports 18500+); the detached supervisor's RSS
   and USS once ready and after 200 chat completions (8 at a time). Target: RSS <= 100 MB.
2. Every TCP socket the graph's processes listen on (`ss -ltnp`, filtered to their pids);
   anything not on 127.0.0.1 is flagged.
3. `dis-serve --help` and `dis-serve validate graphs/demo.yaml` under `python -X importtime`:
   they must import none of dynamo, aiperf, transformers, nor the coordination clients
   (aetcd, grpc, nats); their wall time (median of 10) next to `python -c pass`.

Prints tables and writes benchmarks/results/footprint.json.

    python benchmarks/footprint.py
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
BASE_PORT = 18500
RSS_TARGET_MB = 100
FORBIDDEN = ("dynamo", "aiperf", "transformers", "aetcd", "grpc", "nats")
MB = 1024 * 1024


def demo_file(work: Path) -> Path:
    from relocate import relocated_demo

    path = work / "footprint.yaml"
    path.write_text(yaml.safe_dump(relocated_demo("bench-footprint", BASE_PORT), sort_keys=False))
    return path


def memory(pid: int) -> dict[str, float]:
    info = psutil.Process(pid).memory_full_info()
    return {"rss_mb": info.rss / MB, "uss_mb": info.uss / MB}


def serve_requests(endpoint: str, model: str, count: int = 200) -> int:
    from dis_serve.security.http_client import direct_client

    body = {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "w3 w4"}]}
    with direct_client(60) as client:
        def one(_: int) -> bool:
            return client.post(f"{endpoint}/v1/chat/completions", json=body).status_code == 200

        with ThreadPoolExecutor(8) as pool:
            return sum(pool.map(one, range(count)))


def listening(pids: set[int]) -> list[str]:
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if any(f"pid={p}," in line for p in pids)]


def measure_graph(work: Path) -> dict:
    env = os.environ | {"DIS_SERVE_HOME": str(work / "home")}
    up = subprocess.run([DIS_SERVE, "up", str(demo_file(work)), "--detach"], env=env,
                        capture_output=True, text=True, check=False)
    if up.returncode != 0:
        raise SystemExit(f"dis-serve up failed:\n{up.stderr}")
    try:
        state = json.loads((work / "home" / "runs" / "bench-footprint" / "state.json")
                           .read_text())
        supervisor = state["supervisor_pid"]
        ready = memory(supervisor)
        served = serve_requests(state["endpoint"], state["model_name"])
        time.sleep(1.5)  # a few supervision and health-probe cycles after the load
        after = memory(supervisor)
        pids = {p["pid"] for p in state["processes"]} | {supervisor}
        sockets = listening(pids)
        children = {p["name"]: memory(p["pid"])["rss_mb"] for p in state["processes"]}
    finally:
        subprocess.run([DIS_SERVE, "down", "bench-footprint"], env=env, capture_output=True,
                       check=False)
    return {"supervisor_ready": ready, "supervisor_after_load": after,
            "completions_ok": served, "children_rss_mb": children, "ss_ltnp": sockets,
            "not_loopback": [s for s in sockets if not s.split()[3].startswith("127.0.0.1:")]}


def imported_modules(argv: list[str]) -> set[str]:
    done = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True,
                          text=True, check=False, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed:\n{done.stderr[-2000:]}")
    names = set()
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip())
    return names


def wall_median(argv: list[str], runs: int = 10) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True, cwd=REPO)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure_imports() -> dict:
    commands = {"dis-serve --help": [DIS_SERVE, "--help"],
                "dis-serve validate graphs/demo.yaml": [DIS_SERVE, "validate",
                                                        "graphs/demo.yaml"]}
    report = {"python -c pass": {"wall_s": wall_median([sys.executable, "-c", "pass"])}}
    for label, argv in commands.items():
        modules = imported_modules(argv)
        heavy = sorted(m for m in modules if m.split(".")[0] in FORBIDDEN)
        report[label] = {"wall_s": wall_median(argv), "modules": len(modules),
                         "forbidden_imported": heavy}
    return report


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="footprint-") as tmp:
        graph = measure_graph(Path(tmp))
    imports = measure_imports()

    print("supervisor memory (detached `dis-serve up`, demo graph)")
    for label, key in (("once ready", "supervisor_ready"),
                       (f"after {graph['completions_ok']} completions", "supervisor_after_load")):
        mem = graph[key]
        print(f"  {label:28s} RSS {mem['rss_mb']:6.1f} MB   USS {mem['uss_mb']:6.1f} MB")
    rss = max(graph["supervisor_ready"]["rss_mb"], graph["supervisor_after_load"]["rss_mb"])
    verdict = "meets" if rss <= RSS_TARGET_MB else "misses"
    print(f"  peak RSS {rss:.1f} MB ({verdict} the target <= {RSS_TARGET_MB} MB)")
    print("  for scale, the children: " + ", ".join(
        f"{name} {mb:.0f} MB" for name, mb in graph["children_rss_mb"].items()))
    print("\nlistening sockets of the graph (ss -ltnp)")
    for line in graph["ss_ltnp"]:
        print("  " + " ".join(line.split()))
    if graph["not_loopback"]:
        print(f"  NOT LOOPBACK: {len(graph['not_loopback'])} socket(s) above")
    else:
        print("  all on 127.0.0.1")
    print(f"\n{'command':40s}{'wall s':>8s}{'modules':>9s}  heavy imports")
    for label, row in imports.items():
        heavy = ", ".join(row.get("forbidden_imported", [])) or ("none" if "modules" in row
                                                                 else "")
        print(f"{label:40s}{row['wall_s']:8.3f}{row.get('modules', ''):>9}  {heavy}")

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "footprint.json"
    out.write_text(json.dumps({"graph": graph, "imports": imports,
                               "rss_target_mb": RSS_TARGET_MB,
                               "load_avg_1m": os.getloadavg()[0]}, indent=2))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
