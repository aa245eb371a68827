"""What a local graph writes under its run directory before it serves, which `up` checks the
file system has room for (launch/disk_space.py; the refusal itself: test_disk_full.py)."""

from __future__ import annotations

import sys

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.disk_space import (
    ETCD_BYTES,
    LOG_HEADROOM_BYTES,
    NATS_BYTES,
    needed_bytes,
)
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import ProcessKind, Topology


def _needs(topo: Topology, run_dir) -> dict[str, int]:
    plan = render_launch_plan(topo, RenderContext(run_dir=run_dir, python=sys.executable))
    return {path.removeprefix(f"{run_dir}/"): size
            for path, (size, _what) in needed_bytes(plan, topo, run_dir).items()}


def test_the_demo_graph_needs_room_for_etcds_two_wal_segments_the_logs_and_its_card(tmp_path):
    topo = load_model_file(Topology, DEMO_TOPOLOGY)
    needs = _needs(topo, tmp_path)
    assert needs["etcd-data"] == ETCD_BYTES >= 2 * 64_000_000
    assert needs["logs"] == LOG_HEADROOM_BYTES
    # The demo card's tokenizer.json is 886,781 bytes for its 50,005 entries.
    assert 886_781 < needs["model-card"] < 2 * 886_781
    assert set(needs) == {"etcd-data", "nats-data", "logs", "model-card"}


def test_a_card_already_written_and_external_planes_need_no_room(tmp_path):
    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json", exclude_unset=True)
    data["coordination"] = {"etcd": {"mode": "external", "url": "http://10.0.0.5:2379"},
                            "nats": {"mode": "external", "url": "nats://10.0.0.5:4222"}}
    topo = Topology.model_validate(data)
    (tmp_path / "model-card").mkdir()
    (tmp_path / "model-card" / "tokenizer.json").write_text("{}")
    assert _needs(topo, tmp_path) == {"logs": LOG_HEADROOM_BYTES}


def test_a_nodes_share_needs_room_for_etcd_and_nats_only_where_it_runs_them(tmp_path):
    """A multi-node graph's node runs a share of the plan (launch/agent.py): etcd's and
    NATS's data in its own data directory where it runs them, logs and card elsewhere."""
    topo = load_model_file(Topology, DEMO_TOPOLOGY)
    plan = render_launch_plan(topo, RenderContext(run_dir=tmp_path / "run",
                                                  python=sys.executable))
    coordination = (ProcessKind.ETCD, ProcessKind.NATS)
    head = needed_bytes(plan, topo, tmp_path / "node-data")
    assert head[str(tmp_path / "node-data" / "etcd-data")][0] == ETCD_BYTES
    assert head[str(tmp_path / "node-data" / "nats-data")][0] == NATS_BYTES
    workers = plan.model_copy(update={"processes": [p for p in plan.processes
                                                    if p.kind not in coordination]})
    assert set(needed_bytes(workers, topo, tmp_path / "node-data")) == {
        f"{tmp_path}/run/logs", f"{tmp_path}/run/model-card"}
