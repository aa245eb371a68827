"""`dis-serve top` against a running demo graph: the metrics it reads exist on the real
processes, and one frame taken around a bounded load it sent counts exactly that load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest

from dis_serve.launch.graph import start_graph
from dis_serve.observe.frame import (
    DEPRECATED_FAMILIES,
    ENGINE_FAMILIES,
    FRONTEND_FAMILIES,
    KV_TRANSFER_FAMILIES,
    WORKER_FAMILIES,
)
from dis_serve.observe.prom_window import parse_page
from dis_serve.topology import PoolRole, Topology
from fixtures.dynamo.top.capture import MAX_TOKENS, send
from relocate import relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE_PORT = 18760
CLIENTS, PER_CLIENT = 2, 3
# The 6 requests of 16 tokens end within about a second; the frame waits the whole window.
WINDOW_S = 5.0


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("top")
    topo = Topology.model_validate(relocated_demo("it-top", BASE_PORT))
    with start_graph(topo, run_root=root) as running:
        yield running, root


def _pages(running) -> dict[str, str]:
    urls = {"frontend": f"{running.endpoint}/metrics",
            **{w.name: f"http://127.0.0.1:{w.ports['system']}/metrics"
               for w in running.plan.workers}}
    return {name: " ".join(parse_page(httpx.get(url, timeout=5).text).names())
            for name, url in urls.items()}


def test_every_metric_top_reads_is_on_the_real_graph_and_none_is_deprecated(graph):
    running, _ = graph
    send(running.endpoint, running.model_name, 0, [])  # histograms appear with traffic
    pages = _pages(running)
    assert [f for f in FRONTEND_FAMILIES if f not in pages["frontend"]] == []
    for worker in ("prefill-0", "decode-0"):
        assert [f for f in WORKER_FAMILIES if f not in pages[worker]] == [], worker
    assert [f for f in ENGINE_FAMILIES if f not in pages["decode-0"]] == []
    read = {*FRONTEND_FAMILIES, *WORKER_FAMILIES, *ENGINE_FAMILIES, *KV_TRANSFER_FAMILIES}
    assert not read & set(DEPRECATED_FAMILIES)


def _top_once_around_load(running, root: Path) -> tuple[dict, list[dict]]:
    """Start `top --once --json`, send the load once its first scrape is in, return both."""
    top = subprocess.Popen(
        [DIS_SERVE, "top", "it-top", "--once", "--json", "--window", str(WINDOW_S)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=os.environ | {"DIS_SERVE_HOME": str(root)})
    try:
        assert "measuring it-top" in top.stderr.readline()
        sent: list[dict] = []
        clients = [threading.Thread(target=send, args=(running.endpoint, running.model_name,
                                                       c, sent, PER_CLIENT))
                   for c in range(CLIENTS)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        out, err = top.communicate(timeout=WINDOW_S + 30)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    assert top.returncode == 0, err
    return json.loads(out), sent


def test_top_once_counts_the_load_it_saw_pool_by_pool(graph):
    running, root = graph
    frame, sent = _top_once_around_load(running, root)
    assert len(sent) == CLIENTS * PER_CLIENT
    front = frame["frontend"]
    assert (front["requests"], front["errors"]) == (len(sent), 0)
    window = frame["window_s"]
    assert front["output_tokens_per_s"] * window == pytest.approx(len(sent) * MAX_TOKENS)
    prompt = sum(u["prompt_tokens"] for u in sent)
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0 for u in sent)
    assert front["cached_prompt_pct"] == pytest.approx(100 * cached / prompt)
    assert 0 < front["ttft_p50_ms"] <= front["ttft_p99_ms"]
    pools = {p["pool"]: p for p in frame["pools"]}
    assert set(pools) == {PoolRole.PREFILL.value, PoolRole.DECODE.value}
    for pool in pools.values():
        assert (pool["workers_ready"], pool["workers_total"], pool["restarts"]) == (1, 1, 0)
        assert pool["requests"] == len(sent)
        assert (pool["queue"], pool["active"]) == (0, 0)
    assert pools["prefill"]["prefix_hit_pct"] > 0  # every request after the first shares it
    assert frame["bottleneck"] is None and frame["unreachable"] == []


def test_top_once_draws_the_pools_for_a_person(graph):
    _, root = graph
    result = subprocess.run([DIS_SERVE, "top", "--once", "--window", "1"], capture_output=True,
                            text=True, timeout=60, env=os.environ | {"DIS_SERVE_HOME": str(root)})
    assert result.returncode == 0, result.stderr
    for text in ("it-top: last", "prefill", "decode", "frontend:", "TTFT p50/p99"):
        assert text in result.stdout
