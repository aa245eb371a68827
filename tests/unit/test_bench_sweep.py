"""Resuming a sweep: a finished point's file is reused only when it belongs to the same
scenario, topology, endpoint and point; a torn or foreign file means the point runs again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dis_serve.bench.progress import SilentObserver, parse_request_count
from dis_serve.bench.sweep import (
    fingerprint,
    load_checkpoint,
    point_file,
    run_sweep,
    sweep_lock,
)
from dis_serve.bench.target import BenchTarget
from dis_serve.errors import RunError
from dis_serve.render.metrics_endpoints import MetricsEndpoint
from fixtures.aiperf.load import smoke_result


def _target(url: str = "http://127.0.0.1:28000", digest: str = "topo-1") -> BenchTarget:
    return BenchTarget(url=url, model="demo-model", tokenizer="/tmp/card", gpus=2,
                       gpu_type="h100-sxm", topology_name="bx", topology_file=None,
                       topology_digest=digest,
                       endpoints=(MetricsEndpoint(url=f"{url}/metrics", pool="frontend"),))


def _save_points(out_dir: Path, target: BenchTarget):
    """Point files as an earlier (interrupted or finished) sweep left them."""
    result = smoke_result()
    (out_dir / "points").mkdir(parents=True)
    for p in result.points:
        saved = p.model_copy(update={"fingerprint": fingerprint(result.scenario, target,
                                                                p.point)})
        point_file(out_dir, p.point).write_text(saved.model_dump_json())
    return result


class _Recorder(SilentObserver):
    def __init__(self) -> None:
        self.reused = []
        self.started = []

    def point_reused(self, point, result):
        self.reused.append(point)

    def point_started(self, point, expected_requests, duration_s):
        self.started.append(point)
        raise AssertionError("no point should run: all are checkpointed")


def test_fully_checkpointed_sweep_reuses_every_point_and_runs_nothing(tmp_path):
    target = _target()
    saved = _save_points(tmp_path, target)
    observer = _Recorder()
    result = run_sweep(saved.scenario, target, tmp_path, observer)
    assert observer.reused == saved.scenario.points()
    assert observer.started == []
    assert result.resumed_points == len(saved.points)
    assert [p.aiperf for p in result.points] == [p.aiperf for p in saved.points]


def test_checkpoint_of_another_endpoint_is_not_reused(tmp_path):
    saved = _save_points(tmp_path, _target())
    point = saved.points[0].point
    other = fingerprint(saved.scenario, _target(url="http://127.0.0.1:29000"), point)
    assert load_checkpoint(point_file(tmp_path, point), other) is None


def test_checkpoint_of_another_topology_is_not_reused(tmp_path):
    saved = _save_points(tmp_path, _target())
    point = saved.points[0].point
    other = fingerprint(saved.scenario, _target(digest="topo-2"), point)
    assert load_checkpoint(point_file(tmp_path, point), other) is None


def test_changing_the_workload_changes_every_fingerprint():
    result = smoke_result()
    longer = result.scenario.model_copy(update={"requests": result.scenario.requests * 2})
    for point in result.scenario.points():
        assert fingerprint(result.scenario, _target(), point) != fingerprint(
            longer, _target(), point)


def test_editing_the_description_keeps_the_checkpoints():
    result = smoke_result()
    reworded = result.scenario.model_copy(update={"description": "reworded"})
    point = result.scenario.points()[0]
    assert fingerprint(result.scenario, _target(), point) == fingerprint(
        reworded, _target(), point)


def test_torn_checkpoint_file_means_the_point_runs_again(tmp_path):
    saved = _save_points(tmp_path, _target())
    point = saved.points[0].point
    path = point_file(tmp_path, point)
    path.write_text(path.read_text()[:100])
    assert load_checkpoint(path, fingerprint(saved.scenario, _target(), point)) is None


def test_frontend_request_counter_sums_every_series():
    text = "\n".join([
        "# HELP dynamo_frontend_requests_total Total number of LLM requests processed",
        "# TYPE dynamo_frontend_requests_total counter",
        'dynamo_frontend_requests_total{endpoint="chat_completions",status="success"} 136',
        'dynamo_frontend_requests_total{endpoint="chat_completions",status="error"} 8',
        'dynamo_frontend_requests_total_other{x="y"} 1000',
        "dynamo_frontend_requests_started_total 150",
    ])
    assert parse_request_count(text) == 144


def test_server_without_the_counter_gives_no_count():
    assert parse_request_count("vllm:num_requests_running 3\n") is None


def test_a_second_sweep_into_a_held_output_directory_fails_at_once(tmp_path):
    with sweep_lock(tmp_path), pytest.raises(RunError, match=f"pid {os.getpid()}"), \
            sweep_lock(tmp_path):
        pass
    with sweep_lock(tmp_path):  # released when the holder ends
        pass
