"""What the balancer in front of the frontend costs a streamed chat's time to first token, and
what `option http-no-delay` buys (issue 32).

One demo graph (1 prefill + 1 decode mocker, KV router, private ports 28960+) with its
balancer; three paths to the same frontend, taking turns request by request so a drift of the
shared machine favours none:

    direct         the frontend's own port
    balancer       the graph's haproxy (render/balancer.py, `option http-no-delay`)
    no-delay-off   a second haproxy with the graph's very config less that one line (own
                   port and sockets)

One streamed chat at a time (`--requests` per path, 16 tokens): TTFT is from sending the
request to the first content chunk. Prints each path's TTFT p50/p90 and its ratio to direct;
writes benchmarks/results/balancer_ttft.json.

    flock /tmp/ds-integration.lock python benchmarks/balancer_ttft.py [--requests 60]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from dis_serve.launch.graph import start_graph
from dis_serve.render.balancer import balancer_config_name, hold_script_name
from dis_serve.render.launch_plan import LOCAL_NODE
from dis_serve.topology import ProcessKind, Topology
from relocate import relocated_demo

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BASE_PORT = 28960
ALT_PORT = BASE_PORT + 9  # free in relocate's block (etcd +1/+2, NATS +3/+5, replicas +6)
NO_DELAY = "  option http-no-delay\n"


def ttft_s(client: httpx.Client, endpoint: str, model: str) -> float:
    started = time.perf_counter()
    with client.stream("POST", f"{endpoint}/v1/chat/completions", json={
            "model": model, "max_tokens": 16, "stream": True,
            "messages": [{"role": "user", "content": "w3 w4 w5 w6"}]}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and '"content":"' in line:
                return time.perf_counter() - started
    raise RuntimeError("no content chunk")


def _without_no_delay(run_dir: Path, scratch: Path) -> Path:
    """The graph's balancer config less `option http-no-delay`, on ALT_PORT, working in
    `scratch` (its Unix sockets are named relative to haproxy's directory)."""
    config = (run_dir / balancer_config_name(LOCAL_NODE)).read_text()
    assert NO_DELAY in config
    config = config.replace(NO_DELAY, "").replace(f":{BASE_PORT}\n", f":{ALT_PORT}\n")
    script = hold_script_name(LOCAL_NODE)
    (scratch / script).write_text((run_dir / script).read_text())
    path = scratch / "no-delay-off.cfg"
    path.write_text(config)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    topo = Topology.model_validate(relocated_demo("bench-balancer-ttft", BASE_PORT))
    samples: dict[str, list[float]] = {"direct": [], "balancer": [], "no-delay-off": []}
    with tempfile.TemporaryDirectory() as tmp, start_graph(topo, run_root=Path(tmp)) as graph:
        status = graph.status()
        frontend = next(p for p in status.processes if p.kind is ProcessKind.FRONTEND)
        run_dir = Path(status.run_dir)
        scratch = Path(tmp) / "no-delay-off"
        scratch.mkdir()
        haproxy = subprocess.Popen(["haproxy", "-db", "-C", str(scratch), "-f", str(
            _without_no_delay(run_dir, scratch))], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        try:
            urls = {"direct": f"http://127.0.0.1:{frontend.ports['replica']}",
                    "balancer": graph.endpoint, "no-delay-off": f"http://127.0.0.1:{ALT_PORT}"}
            with httpx.Client(timeout=10, trust_env=False) as client:
                time.sleep(1.5)  # the second haproxy's checks put the frontend up
                for url in urls.values():  # warm every path's connections
                    ttft_s(client, url, graph.model_name)
                for _ in range(args.requests):
                    for arm, url in urls.items():
                        samples[arm].append(ttft_s(client, url, graph.model_name))
        finally:
            haproxy.terminate()
            haproxy.wait(timeout=10)
    direct = statistics.median(samples["direct"])
    summary = {}
    for arm, values in samples.items():
        p50 = statistics.median(values)
        p90 = statistics.quantiles(values, n=10)[-1]
        summary[arm] = {"ttft_p50_ms": round(p50 * 1000, 1), "ttft_p90_ms": round(p90 * 1000, 1),
                        "p50_vs_direct": round(p50 / direct, 2), "requests": len(values)}
        print(f"{arm:13} TTFT p50 {p50 * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  "
              f"p50 x{p50 / direct:.2f} of direct")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "balancer_ttft.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
