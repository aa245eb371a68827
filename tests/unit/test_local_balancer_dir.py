"""A local graph's balancer works in a private directory of its own outside the run
directory (launch/node_data.py), so that deleting the run directory costs it nothing: made
at `up`, recorded once in the run record, removed by every stop. No processes start here."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from dis_serve.launch import graph
from dis_serve.launch.graph import prepare_run
from dis_serve.launch.node_data import local_graph_dir, lock_file
from dis_serve.render.balancer import (
    MONITOR_SOCKET,
    balancer_config_name,
    hold_script_name,
)
from dis_serve.render.launch_plan import LOCAL_NODE, render_launch_plan
from dis_serve.topology import ProcessKind, Topology
from relocate import relocated_demo


@pytest.fixture
def topo(tmp_path, monkeypatch) -> Topology:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))  # never the machine's /tmp
    return Topology.model_validate(relocated_demo("own-bal", 19740))


def _balancer(plan):
    return next(p for p in plan.processes if p.kind is ProcessKind.BALANCER)


def test_up_writes_the_balancers_files_in_its_own_private_directory_and_records_it(
        tmp_path, topo):
    prepared = prepare_run(topo, tmp_path)
    try:
        own = Path(prepared.run_dir.read_record().balancer_dir)
        assert own == local_graph_dir(topo, os.environ)
        assert prepared.run_dir.path.resolve() not in own.parents
        assert stat.S_IMODE(own.stat().st_mode) == 0o700
        assert sorted(p.name for p in own.iterdir()) == sorted(
            [balancer_config_name(LOCAL_NODE), hold_script_name(LOCAL_NODE)])
        assert not (prepared.run_dir.path / balancer_config_name(LOCAL_NODE)).exists()
        balancer = _balancer(prepared.plan)
        assert balancer.argv[-4:] == ["-C", str(own), "-f", balancer_config_name(LOCAL_NODE)]
        assert balancer.readiness.socket == f"{own}/{MONITOR_SOCKET}"
    finally:
        prepared.release()
    assert not own.exists() and not lock_file(own).exists()


def test_a_change_of_the_running_graph_renders_the_same_balancer(tmp_path, topo):
    prepared = prepare_run(topo, tmp_path)
    try:
        again = render_launch_plan(topo, prepared.run_dir.read_context())
    finally:
        prepared.release()
    assert _balancer(again) == _balancer(prepared.plan)


def test_a_failed_up_leaves_no_balancer_directory(tmp_path, topo, monkeypatch):
    def full_disk(*_args) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(graph, "write_coordination_inputs", full_disk)
    with pytest.raises(OSError):
        prepare_run(topo, tmp_path)
    own = local_graph_dir(topo, os.environ)
    assert not own.exists() and not lock_file(own).exists()


def test_a_graph_without_a_balancer_has_no_directory_of_its_own(tmp_path, topo):
    data = relocated_demo("own-bal", 19740)
    data["frontend"] = {**data.get("frontend", {}), "balancer": False}
    prepared = prepare_run(Topology.model_validate(data), tmp_path)
    prepared.release()
    assert prepared.run_dir.read_record().balancer_dir is None
    assert not local_graph_dir(topo, os.environ).parent.exists()
