"""`dis-serve top`'s figures: read off two real scrapes of a demo graph a bounded load apart
(tests/fixtures/dynamo/top), they match what the load was; the window arithmetic follows
PromQL's; the bottleneck is the pool with requests waiting, or the fullest one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from dis_serve.cli.observe_cmds import render_frame
from dis_serve.errors import UserInputError
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from dis_serve.observe.frame import (
    DEPRECATED_FAMILIES,
    ENGINE_FAMILIES,
    FRONTEND_FAMILIES,
    ITL,
    KV_TRANSFER_FAMILIES,
    TTFT,
    WORKER_FAMILIES,
    GraphLayout,
    GraphScrape,
    WorkerTarget,
    bottleneck,
    build_frame,
)
from dis_serve.observe.prom_window import increase, parse_page, quantile
from dis_serve.observe.scrape import layout_from_url
from dis_serve.placements.lookup import layout_from_run
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import PoolRole, Topology
from relocate import relocated_demo

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "dynamo" / "top"
SENT = json.loads((HERE / "sent.json").read_text())
WINDOW_S = 10.0
PROCESSES = ("frontend", "prefill-0", "decode-0")


def _scrape(when: str, at_s: float) -> GraphScrape:
    return GraphScrape(at_s=at_s, pages={name: parse_page((HERE / when / f"{name}.prom")
                                                          .read_text()) for name in PROCESSES})


LAYOUT = GraphLayout(
    name="top-fixture", frontend_metrics_url="frontend",
    pools=[PoolRole.PREFILL, PoolRole.DECODE],
    workers=[WorkerTarget(name=n, pool=PoolRole(n.split("-")[0]), metrics_url=n, ready=True,
                          restarts=0) for n in PROCESSES[1:]],
    batch_capacity={PoolRole.PREFILL: 64, PoolRole.DECODE: 256})


@pytest.fixture(scope="module")
def frame():
    return build_frame(LAYOUT, _scrape("before", 0.0), _scrape("after", WINDOW_S))


def test_the_frontend_counts_exactly_the_requests_and_tokens_sent(frame):
    f = frame.frontend
    assert (f.requests, f.errors) == (SENT["requests"], 0)
    assert f.requests_per_s == pytest.approx(SENT["requests"] / WINDOW_S)
    assert f.output_tokens_per_s == pytest.approx(SENT["completion_tokens"] / WINDOW_S)
    assert f.cached_prompt_pct == pytest.approx(
        100 * SENT["cached_tokens"] / SENT["prompt_tokens"])


def test_every_request_passed_through_both_pools_and_left_them(frame):
    for pool in frame.pools:
        assert (pool.workers_ready, pool.workers_total, pool.restarts) == (1, 1, 0)
        assert pool.requests == SENT["requests"]
        assert (pool.queue, pool.active) == (0, 0)
    assert frame.frontend.active == 0


def test_latency_histograms_cover_the_windows_requests_only():
    before, after = _scrape("before", 0).pages["frontend"], _scrape("after", 1).pages["frontend"]
    assert increase(before, after, f"{TTFT}_count") == SENT["requests"]
    # One inter-token gap fewer than tokens per request.
    assert increase(before, after, f"{ITL}_count") == (
        SENT["completion_tokens"] - SENT["requests"])


def test_latency_percentiles_are_ordered_and_in_milliseconds(frame):
    f = frame.frontend
    assert 0 < f.ttft_p50_ms <= f.ttft_p99_ms < 1000
    assert 0 < f.itl_p50_ms <= f.itl_p99_ms < 1000


def test_kv_figures_name_where_they_come_from(frame):
    prefill, decode = frame.pools
    assert decode.kv_cache_from == "engine"  # the mocker's decode worker publishes trtllm:*
    assert prefill.kv_cache_from == "router"  # its prefill worker does not: the router's view
    assert decode.kv_transfer_from == "router estimate" and decode.kv_transfer_ms > 0
    assert prefill.kv_transfer_ms is None


def test_the_router_saw_the_shared_prefix_at_prefill(frame):
    prefill, decode = frame.pools
    assert 0 < prefill.prefix_hit_pct <= 100
    assert decode.prefix_hit_pct == 0  # decode is routed after the prefill wrote the KV


def test_a_finished_load_leaves_no_bottleneck(frame):
    assert frame.bottleneck is None
    assert frame.verdict == "no bottleneck: every pool has headroom"


def test_no_traffic_in_the_window_reads_as_idle():
    same = _scrape("after", 0.0)
    frame = build_frame(LAYOUT, same, GraphScrape(at_s=1.0, pages=same.pages))
    assert frame.frontend.requests == 0
    assert frame.verdict == "idle: no requests in the window"


def test_the_pool_with_requests_queued_is_the_bottleneck_even_with_the_other_idle(frame):
    prefill, decode = frame.pools
    starved = [prefill, decode.model_copy(update={"queue": 12.0, "active": 256.0})]
    assert bottleneck(starved, frame.frontend) == (
        PoolRole.DECODE, "decode is the bottleneck: 12 requests queued while prefill idles")


def test_a_nearly_full_pool_is_the_bottleneck_when_nothing_queues(frame):
    prefill, decode = frame.pools
    full = [prefill.model_copy(update={"saturation": 0.9, "active": 58.0}), decode]
    assert bottleneck(full, frame.frontend)[0] is PoolRole.PREFILL
    assert "90% full" in bottleneck(full, frame.frontend)[1]


def test_quantiles_interpolate_inside_the_bucket_like_promql():
    before = parse_page('h_bucket{le="0.1"} 0\nh_bucket{le="0.2"} 0\nh_bucket{le="+Inf"} 0\n')
    after = parse_page('h_bucket{le="0.1"} 5\nh_bucket{le="0.2"} 15\nh_bucket{le="+Inf"} 15\n')
    assert quantile(before, after, "h", 0.5) == pytest.approx(0.125)  # rank 7.5 of 5..15
    assert quantile(before, before, "h", 0.5) is None


def test_a_reset_counter_counts_its_new_value():
    assert increase(parse_page("c_total 40\n"), parse_page("c_total 3\n"), "c_total") == 3


def test_top_reads_no_deprecated_metric_and_the_real_pages_have_what_it_reads():
    read = {*FRONTEND_FAMILIES, *WORKER_FAMILIES, *ENGINE_FAMILIES, *KV_TRANSFER_FAMILIES}
    assert not read & set(DEPRECATED_FAMILIES)
    after = _scrape("after", 0).pages
    names = {p: " ".join(after[p].names()) for p in PROCESSES}
    assert all(family in names["frontend"] for family in FRONTEND_FAMILIES)
    for worker in PROCESSES[1:]:
        assert all(family in names[worker] for family in WORKER_FAMILIES)
    assert all(family in names["decode-0"] for family in ENGINE_FAMILIES)


def test_a_graph_known_by_url_only_takes_its_pools_from_the_router():
    layout = layout_from_url("http://127.0.0.1:19500", _scrape("after", 0).pages["frontend"])
    assert layout.pools == [PoolRole.PREFILL, PoolRole.DECODE]
    assert layout.frontend_metrics_url == "http://127.0.0.1:19500/metrics"
    assert layout.workers == []


def _write_run(root: Path, name: str, restarts: int = 0) -> Topology:
    topo = Topology.model_validate(relocated_demo(name, 19500))
    run = RunDir.for_graph(name, root)
    plan = render_launch_plan(topo, RenderContext(run_dir=run.path))
    run.write_launch_inputs(topo, plan)
    run.write_state(GraphStatus(
        name=name, namespace=plan.namespace, run_dir=str(run.path), endpoint=plan.endpoint,
        model_name=plan.model_name, supervisor_pid=1, supervisor_create_time=0.0,
        phase=GraphPhase.READY, started_at=0.0,
        processes=[ProcessStatus(name=p.name, kind=p.kind, state=ProcessState.READY,
                                 ready=p.name != "decode-0", restarts=restarts,
                                 ports=p.ports) for p in plan.processes]))
    return topo


def test_a_graph_of_the_run_directory_is_watched_on_its_plans_ports(tmp_path):
    _write_run(tmp_path, "watched", restarts=2)
    layout = layout_from_run("watched", tmp_path)
    assert layout.frontend_metrics_url == "http://127.0.0.1:19500/metrics"
    assert [(w.name, w.metrics_url, w.ready, w.restarts) for w in layout.workers] == [
        ("prefill-0", "http://127.0.0.1:19510/metrics", True, 2),
        ("decode-0", "http://127.0.0.1:19511/metrics", False, 2)]
    assert layout.batch_capacity[PoolRole.DECODE] > 0


def test_without_a_name_top_watches_the_only_running_graph(tmp_path):
    _write_run(tmp_path, "first")
    assert layout_from_run(None, tmp_path).name == "first"
    _write_run(tmp_path, "second")
    with pytest.raises(UserInputError, match=r"several graphs are running \(first, second\)"):
        layout_from_run(None, tmp_path)


def test_a_frame_shows_each_pool_the_frontend_and_the_verdict(frame):
    console = Console(record=True, width=140)
    console.print(render_frame(frame))
    text = console.export_text()
    assert "prefill" in text and "decode" in text
    assert "12 in the window, 0 failed" in text
    assert "no bottleneck" in text
