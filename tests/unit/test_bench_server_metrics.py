"""Server side of a point: endpoints come from the topology's launch plan, and AIPerf's server
metrics export (real runs, tests/fixtures/aiperf) folds into one row per pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from dis_serve.bench.server_metrics import (
    ACTIVE,
    KV_USAGE,
    ROUTER_QUEUE,
    read_server_metrics,
    summarize,
)
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.metrics_endpoints import graph_endpoints
from dis_serve.topology import Topology

FIXTURES = REPO / "tests" / "fixtures" / "aiperf"


def _endpoints(name: str):
    topo = load_model_file(Topology, FIXTURES / name / "topology.yaml")
    plan = render_launch_plan(topo, RenderContext(run_dir=Path("/nonexistent")))
    return topo, graph_endpoints(plan, plan.endpoint)


def _raw(name: str) -> dict:
    return json.loads((FIXTURES / name / "server_metrics_export.json").read_text())


def _series(raw: dict, metric: str, url: str, **labels) -> list[dict]:
    return [s["stats"] for s in raw["metrics"][metric]["series"]
            if s["endpoint_url"] == url
            and all(s.get("labels", {}).get(k) == v for k, v in labels.items())]


def test_endpoints_are_the_frontend_and_every_workers_system_port():
    topo, endpoints = _endpoints("disagg-c4")
    base = topo.observability.system_port_base
    assert [(e.pool, e.url) for e in endpoints] == [
        ("frontend", f"http://127.0.0.1:{topo.frontend.port}/metrics"),
        ("prefill", f"http://127.0.0.1:{base}/metrics"),
        ("decode", f"http://127.0.0.1:{base + 1}/metrics"),
    ]


def test_disaggregated_graph_gives_one_row_per_pool():
    _, endpoints = _endpoints("disagg-c4")
    load = read_server_metrics(FIXTURES / "disagg-c4" / "server_metrics_export.json", endpoints)
    assert [p.pool for p in load.pools] == ["prefill", "decode"]
    assert [p.workers for p in load.pools] == [1, 1]
    assert load.unreachable == []
    assert load.frontend is not None


def test_active_requests_are_the_workers_generate_endpoint():
    _, endpoints = _endpoints("disagg-c4")
    raw = _raw("disagg-c4")
    load = summarize(raw, endpoints)
    decode = next(p for p in load.pools if p.pool == "decode")
    url = next(e.url for e in endpoints if e.pool == "decode")
    (stats,) = _series(raw, ACTIVE, url, dynamo_endpoint="generate")
    assert decode.active_requests.mean == stats["avg"]
    assert decode.active_requests.peak == stats["max"]
    assert decode.active_requests.peak > 0


def test_mocker_prefill_workers_report_no_kv_usage_rather_than_zero():
    _, endpoints = _endpoints("disagg-c4")
    load = summarize(_raw("disagg-c4"), endpoints)
    prefill, decode = load.pools
    assert prefill.kv_cache_usage is None
    assert decode.kv_cache_usage is not None
    assert 0 < decode.kv_cache_usage.peak <= 1


def test_decode_queue_includes_the_routers_decode_queue():
    _, endpoints = _endpoints("disagg-c4")
    raw = _raw("disagg-c4")
    decode = next(p for p in summarize(raw, endpoints).pools if p.pool == "decode")
    frontend = endpoints[0].url
    (router,) = _series(raw, ROUTER_QUEUE, frontend, worker_type="decode")
    worker = next(e.url for e in endpoints if e.pool == "decode")
    worker_queues = [s for m in ("dynamo_request_queue", "trtllm:num_requests_waiting")
                     for s in _series(raw, m, worker)]
    assert decode.queue_depth.mean == pytest.approx(
        router["avg"] + sum(s["avg"] for s in worker_queues))


def test_aggregated_workers_are_one_pool_averaging_kv_usage():
    _, endpoints = _endpoints("agg-c4")
    raw = _raw("agg-c4")
    (agg,) = summarize(raw, endpoints).pools
    assert agg.pool == "agg"
    assert agg.workers == 2
    kv = [s for e in endpoints if e.pool == "agg" for s in _series(raw, KV_USAGE, e.url)]
    assert agg.kv_cache_usage.mean == pytest.approx(sum(s["avg"] for s in kv) / len(kv))


def test_endpoints_aiperf_could_not_reach_are_listed():
    _, endpoints = _endpoints("disagg-c4")
    raw = _raw("disagg-c4")
    decode_url = endpoints[2].url
    raw["summary"]["endpoints_successful"].remove(decode_url)
    load = summarize(raw, endpoints)
    assert load.unreachable == [decode_url]
    assert next(p for p in load.pools if p.pool == "decode").workers == 0


def test_no_export_means_no_server_load(tmp_path):
    _, endpoints = _endpoints("disagg-c4")
    assert read_server_metrics(tmp_path / "server_metrics_export.json", endpoints) is None


def test_bench_reads_the_plan_up_wrote_rather_than_rendering_one(tmp_path, monkeypatch):
    from dis_serve.bench.target import plan_of
    from dis_serve.builtin import DEMO_TOPOLOGY
    from dis_serve.launch.rundir import RunDir
    from dis_serve.render.launch_plan import RenderContext, render_launch_plan

    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    topo = load_model_file(Topology, DEMO_TOPOLOGY)
    rendered_here = plan_of(topo)
    assert rendered_here.model_path == str(RunDir.for_graph(topo.name).path / "model-card")
    # `up` rendered with the model directory it found on its machine: bench must use that.
    up_plan = render_launch_plan(topo, RenderContext(run_dir=tmp_path / "elsewhere",
                                                     model_path="/models/card"))
    RunDir.for_graph(topo.name).write_launch_inputs(topo, up_plan)
    assert plan_of(topo) == up_plan


def test_a_plan_up_wrote_for_another_topology_of_the_same_name_is_not_used(tmp_path,
                                                                          monkeypatch):
    from dis_serve.bench.target import plan_of
    from dis_serve.builtin import DEMO_TOPOLOGY
    from dis_serve.launch.rundir import RunDir
    from dis_serve.render.launch_plan import RenderContext, render_launch_plan

    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    running = load_model_file(Topology, DEMO_TOPOLOGY)
    RunDir.for_graph(running.name).write_launch_inputs(
        running, render_launch_plan(running, RenderContext(run_dir=tmp_path)))
    other = running.model_copy(update={"model": running.model.model_copy(
        update={"served_name": "other-model"})})
    assert plan_of(other).model_name == "other-model"
