"""Each workload type against a real demo graph, cold/warm prefix caches, and the router A/B
from one command. Workloads are kept to a few seconds of load each.

Ports: the demo graph 28600-28620; graphs `bench` or `compare` bring up 28700-28720.
"""

from __future__ import annotations

import pytest
import yaml
from test_bench_smoke import _cli, _processes_mentioning, _topology_file

from conftest import GRAPHS, REPO
from dis_serve.bench.runner import bench_running, bench_topology
from dis_serve.bench.scenario import CacheState, Scenario, load_scenario
from dis_serve.inputs.yaml_input import load_model_file, parse_model
from dis_serve.launch.graph import start_graph
from dis_serve.topology import Topology

pytestmark = pytest.mark.integration
SLA = {"ttft_ms": 2000, "itl_ms": 200}


def _scenario(name: str, **workload) -> Scenario:
    return parse_model(Scenario, {"name": name, "sla": SLA} | workload, name)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("workloads-home")


@pytest.fixture(scope="module")
def demo_file(home):
    return _topology_file(home, GRAPHS / "demo.yaml", "wl-demo", 28600)


@pytest.fixture(scope="module")
def demo_graph(home, demo_file):
    with start_graph(load_model_file(Topology, demo_file), run_root=home) as graph:
        yield graph


def _bench(home, demo_graph, demo_file, scenario: Scenario):
    run = bench_running(load_model_file(Topology, demo_file), scenario, home / scenario.name,
                        url=demo_graph.endpoint, topology_file=demo_file)
    return run.result.points


def test_shared_prefix_prompts_hit_the_workers_prefix_cache(home, demo_graph, demo_file):
    scenario = _scenario("wl-prefix", input_tokens={"mean": 512}, output_tokens={"mean": 8},
                         shared_prefix={"ratio": 0.75, "prefixes": 2},
                         requests=12, concurrency=[2])
    (point,) = _bench(home, demo_graph, demo_file, scenario)
    assert point.aiperf.errors == 0 and point.aiperf.completed_requests == 12
    # Two prefixes of 384 tokens in 12 requests: most prefix tokens come from the cache.
    assert 40 < point.aiperf.prefix_cache_hit_pct < 100
    assert point.prefix_cache is CacheState.WARM  # a graph we did not start: history unknown


def test_multi_turn_chats_resend_the_conversation(home, demo_graph, demo_file):
    scenario = _scenario("wl-chat", input_tokens={"mean": 64}, output_tokens={"mean": 8},
                         multi_turn={"turns": 2, "conversations": 4},
                         requests=8, concurrency=[2], input_buckets=[100])
    (point,) = _bench(home, demo_graph, demo_file, scenario)
    assert point.aiperf.errors == 0 and point.aiperf.completed_requests == 8
    # Second turns carry the first turn and its answer: longer than any first turn.
    first, later = point.input_buckets
    assert (first.requests, later.requests) == (4, 4)


def test_trace_replays_every_row_on_its_timestamps(home, demo_graph, demo_file):
    data = yaml.safe_load((REPO / "benchmarks" / "trace.yaml").read_text())
    data.update(name="wl-trace", reset_prefix_cache=False, trace=data["trace"] | {
        "file": str(REPO / "benchmarks" / "traces" / "sample-mooncake.jsonl"),
        "speedup": [8]})
    path = home / "wl-trace.yaml"
    path.write_text(yaml.safe_dump(data))
    scenario = load_scenario(path)
    (point,) = _bench(home, demo_graph, demo_file, scenario)
    rows = len(scenario.trace.file.read_text().splitlines())
    assert point.aiperf.errors == 0 and point.aiperf.completed_requests == rows
    assert sum(b.requests for b in point.input_buckets) == rows
    assert point.schedule_lag is not None and point.schedule_lag.requests == rows


def test_reset_prefix_cache_restarts_the_graph_before_every_point(home):
    topo_file = _topology_file(home, GRAPHS / "demo.yaml", "wl-cold", 28700)
    scenario = _scenario("wl-cold", input_tokens={"mean": 256}, output_tokens={"mean": 4},
                         shared_prefix={"ratio": 0.5, "prefixes": 1},
                         requests=4, concurrency=[1, 2], reset_prefix_cache=True)
    run = bench_topology(load_model_file(Topology, topo_file), scenario, home / "wl-cold",
                         topology_file=topo_file, run_root=home)
    assert [p.prefix_cache for p in run.result.points] == [CacheState.COLD] * 2
    # The second point's first request missed again: its workers were fresh.
    assert all(p.aiperf.prefix_cache_hit_pct < 50 for p in run.result.points)
    assert _processes_mentioning(str(home / "runs" / "wl-cold")) == []


def test_router_ab_runs_from_one_command_with_repetitions(home):
    agg = _topology_file(home, GRAPHS / "agg-mocker.yaml", "wl-ab", 28700)
    scenario = home / "wl-ab-scenario.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "wl-ab", "input_tokens": {"mean": 256}, "output_tokens": {"mean": 4},
        "shared_prefix": {"ratio": 0.75, "prefixes": 4},
        "requests": 8, "concurrency": [2], "reset_prefix_cache": True, "sla": SLA}))
    out = home / "ab"
    result = _cli(home, "compare", agg, "--vary", "router.mode=kv,round-robin",
                  "--repeat", "2", "--scenario", scenario, "--out", out, timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (out / "compare.md").read_text()
    assert "`router.mode=kv` vs `router.mode=round-robin`" in text
    assert "Prefix-cache hits (% of prompt tokens)" in text
    for png in ("compare.png", "latency-cdf.png", "goodput-vs-load.png", "hit-rate.png"):
        assert (out / png).is_file(), png
    for arm in ("router-mode-kv", "router-mode-round-robin"):
        for rep in ("rep-1", "rep-2"):
            assert (out / arm / rep / "report.md").is_file()
    assert "goodput/GPU at concurrency 2" in result.stdout
    assert _processes_mentioning(str(home / "runs" / "wl-ab")) == []
