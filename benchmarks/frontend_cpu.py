"""Dynamo frontend CPU per request/s, measured on the mocker demo graph.

The Kubernetes frontend's CPU request and limit are sized from this figure
(`FRONTEND_CPU_S_PER_REQUEST` in toolkit/dis_serve/placements/kubernetes/pod.py). The demo
graph runs on private ports (28700+). An open-loop load (requests started at fixed
intervals, whatever the replies do) of streaming chat completions with a fixed shape runs at
a few rates, one window each; the frontend process's CPU time (psutil `cpu_times`, user +
system, its children included) is read before and after each window and after an idle window
of the same length.

    cpu per request (s) = (window CPU - idle CPU rate x window wall) / requests finished

The frontend's work per request is tokenising the prompt, routing (the KV router hashes the
prompt's blocks), and detokenising and streaming every output token, so the figure belongs to
the shape it was measured with: --input-words / --output-tokens. Run it under the shared lock:

    flock /tmp/ds-integration.lock python benchmarks/frontend_cpu.py [--rates 2 5 10]

Writes benchmarks/results/frontend_cpu.json; --baseline also records the run under its
shape in benchmarks/baselines/frontend-cpu.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
BASELINE = REPO / "benchmarks" / "baselines" / "frontend-cpu.json"
BASE_PORT = 28700
# Common English words: the mocker card's tokenizer maps each to one token.
WORDS = [
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be",
    "by", "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have",
    "an", "they", "you", "were", "her", "she", "there", "one", "all", "we", "their", "been",
    "has", "when", "who", "will", "more", "no", "if", "out", "so", "said", "what", "up",
    "its", "about", "into", "than", "them", "can", "only"
]


def demo_topology(work: Path) -> Path:
    from relocate import relocated_demo

    path = work / "topology.yaml"
    path.write_text(yaml.safe_dump(relocated_demo("frontend-cpu", BASE_PORT), sort_keys=False))
    return path


def cpu_seconds(proc: psutil.Process) -> float:
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system
    return total


def prompt(i: int, words: int) -> str:
    # A distinct prefix per request, so the KV router hashes fresh blocks each time.
    return f"request {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(words))


async def one_request(client: httpx.AsyncClient, url: str, model: str, i: int,
                      args: argparse.Namespace) -> dict:
    body = {"model": model, "stream": True, "max_tokens": args.output_tokens,
            "stream_options": {"include_usage": True},
            # As AIPerf's --extra-inputs ignore_eos: every request streams the full count.
            "ignore_eos": True, "min_tokens": args.output_tokens,
            "messages": [{"role": "user", "content": prompt(i, args.input_words)}]}
    usage = None
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as reply:
        if reply.status_code != 200:
            raise SystemExit(f"request {i}: HTTP {reply.status_code}: "
                             f"{(await reply.aread()).decode()[:300]}")
        async for line in reply.aiter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunk = json.loads(line[6:])
                usage = chunk.get("usage") or usage
    return usage or {}


async def window(url: str, model: str, rate: float, seconds: float,
                 args: argparse.Namespace, start_index: int) -> list[dict]:
    count = max(1, round(rate * seconds))
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=count)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:
        tasks = []
        t0 = time.monotonic()
        for i in range(count):
            await asyncio.sleep(max(0.0, t0 + i / rate - time.monotonic()))
            tasks.append(asyncio.create_task(
                one_request(client, url, model, start_index + i, args)))
        return await asyncio.gather(*tasks)


def measure(proc: psutil.Process, url: str, model: str, rate: float, seconds: float,
            args: argparse.Namespace, start_index: int) -> dict:
    cpu0, t0 = cpu_seconds(proc), time.monotonic()
    usages = asyncio.run(window(url, model, rate, seconds, args, start_index))
    cpu1, t1 = cpu_seconds(proc), time.monotonic()
    return {"rate_target": rate, "requests": len(usages), "wall_s": t1 - t0,
            "cpu_s": cpu1 - cpu0,
            "prompt_tokens": statistics.fmean(u.get("prompt_tokens", 0) for u in usages),
            "completion_tokens": statistics.fmean(u.get("completion_tokens", 0) for u in usages)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rates", type=float, nargs="+", default=[2.0, 5.0, 10.0])
    parser.add_argument("--window-s", type=float, default=20.0)
    parser.add_argument("--input-words", type=int, default=1000)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--baseline", action="store_true",
                        help=f"Also write {BASELINE.relative_to(REPO)}.")
    args = parser.parse_args()

    from dis_serve.inputs.yaml_input import load_model_file
    from dis_serve.launch.graph import start_graph
    from dis_serve.topology import Topology

    with tempfile.TemporaryDirectory(prefix="dis-serve-frontend-cpu-") as tmp:
        work = Path(tmp)
        topo = load_model_file(Topology, demo_topology(work))
        with start_graph(topo, run_root=work / "home") as graph:
            frontend = psutil.Process(graph.status().process("frontend").pid)
            url, model = graph.endpoint, graph.model_name
            measure(frontend, url, model, 2.0, 3.0, args, 0)  # warm-up, not counted
            cpu0, t0 = cpu_seconds(frontend), time.monotonic()
            time.sleep(args.window_s)
            idle_cores = (cpu_seconds(frontend) - cpu0) / (time.monotonic() - t0)
            windows = [measure(frontend, url, model, rate, args.window_s, args,
                               10_000 * (n + 1))
                       for n, rate in enumerate(args.rates)]

    for w in windows:
        w["rate_achieved"] = w["requests"] / w["wall_s"]
        w["cores"] = w["cpu_s"] / w["wall_s"]
        w["cpu_s_per_request"] = (w["cpu_s"] - idle_cores * w["wall_s"]) / w["requests"]
    per_request = statistics.median(w["cpu_s_per_request"] for w in windows)
    print(f"idle: {idle_cores:.3f} cores")
    print(f"{'rate':>6} {'achieved':>9} {'reqs':>5} {'in tok':>7} {'out tok':>8} "
          f"{'cores':>6} {'CPU ms/req':>11}")
    for w in windows:
        print(f"{w['rate_target']:>6.1f} {w['rate_achieved']:>9.2f} {w['requests']:>5} "
              f"{w['prompt_tokens']:>7.0f} {w['completion_tokens']:>8.0f} {w['cores']:>6.3f} "
              f"{1000 * w['cpu_s_per_request']:>11.1f}")
    print(f"median: {1000 * per_request:.1f} ms of frontend CPU per request "
          f"= {per_request:.4f} cores per request/s")
    result = {"benchmark": "frontend_cpu", "machine": platform.node(), "cpus": os.cpu_count(),
              "dynamo": "1.6.1 (mocker demo graph, KV router)",
              "shape": {"input_words": args.input_words, "output_tokens": args.output_tokens,
                        "streaming": True},
              "window_s": args.window_s, "idle_cores": idle_cores, "windows": windows,
              "cpu_s_per_request_median": per_request}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "frontend_cpu.json").write_text(json.dumps(result, indent=2))
    if args.baseline:  # one run per shape; the sizing constants are fitted to these
        baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {
            "benchmark": "frontend_cpu", "command": "flock /tmp/ds-integration.lock python "
            "benchmarks/frontend_cpu.py --input-words W --output-tokens T --baseline",
            "runs": {}}
        baseline["runs"][f"{args.input_words}x{args.output_tokens}"] = result
        BASELINE.write_text(json.dumps(baseline, indent=2) + "\n")
    print(f"wrote {RESULTS / 'frontend_cpu.json'}" + (f" and {BASELINE}" if args.baseline else ""))


if __name__ == "__main__":
    main()
