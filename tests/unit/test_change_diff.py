"""What an edited topology changes in a running graph (`dis-serve apply`, change/diff.py):
worker counts, rolls of the workers whose process differs, what only the record keeps, and
what needs a new graph, each change named by its topology key."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import GRAPHS
from dis_serve.change.diff import diff
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.node_layout import worker_slots
from dis_serve.topology import PoolRole, Topology

CONTEXT = RenderContext(run_dir=Path("/run/demo"))


def _demo(edit=lambda data: None) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    edit(data)
    return Topology.model_validate(data)


def _changes(edited: Topology, running: Topology | None = None):
    running = running or _demo()
    workers = render_launch_plan(running, CONTEXT).workers
    rendered = {p.name: p for p in render_launch_plan(edited, CONTEXT,
                                                      worker_slots(running)).processes}
    return diff(running, edited, workers, rendered)


def test_a_new_worker_count_adds_workers_and_rolls_none():
    changes = _changes(_demo(lambda d: d["pools"]["decode"].update(workers=3)))
    decode = next(p for p in changes.pools if p.role is PoolRole.DECODE)
    assert (decode.before, decode.after, decode.rolled) == (1, 3, [])
    assert changes.describe() == ["decode: 1 -> 3 workers (add 2)"]


def test_an_engine_setting_rolls_that_pool_only_and_says_why():
    changes = _changes(_demo(lambda d: d["pools"]["decode"].update(max_batch_size=128)))
    assert [(p.role, p.rolled) for p in changes.pools if p.rolled] == [
        (PoolRole.DECODE, ["decode-0"])]
    assert changes.describe() == [
        "decode: roll decode-0 (pools.decode.max_batch_size changed)"]


def test_a_setting_every_worker_reads_rolls_every_pool():
    changes = _changes(_demo(lambda d: d.setdefault("mocker", {}).update(speedup_ratio=2.0)))
    assert {p.role: p.rolled for p in changes.pools} == {
        PoolRole.PREFILL: ["prefill-0"], PoolRole.DECODE: ["decode-0"]}


def test_a_bound_or_drain_timeout_is_recorded_without_restarting_anything():
    changes = _changes(_demo(lambda d: (d["pools"]["decode"].update(max_workers=6),
                                        d.setdefault("supervision", {}).update(
                                            drain_timeout_s=30))))
    assert not changes.changes_workers and not changes.refused
    assert changes.recorded == ["pools.decode.max_workers", "supervision.drain_timeout_s"]


def test_the_model_or_a_port_needs_a_new_graph_and_says_why():
    model = _changes(_demo(lambda d: d["model"].update(served_name="other")))
    assert model.refused == [("model.served_name", "every worker and the frontend's model "
                                                   "would change at once")]
    port = _changes(_demo(lambda d: d["frontend"].update(port=8001)))
    assert port.refused[0][0] == "frontend.port"
    assert "needs a new graph" in port.describe()[0]


def test_an_unchanged_topology_is_no_change():
    assert _changes(_demo()).describe() == ["no change"]
