"""One owner per graph name (the run lock) and per port (machine-wide claims), before any
process starts. flock locks belong to open file descriptions, so two acquisitions in this
one process contend exactly as two `up` processes do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.errors import PreflightError
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch import port_claims
from dis_serve.launch.port_claims import claim_ports
from dis_serve.launch.run_lock import RunLock, lock_holder
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.lookup import find_run, is_active
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import Topology


@pytest.fixture(autouse=True)
def _private_claims(monkeypatch, tmp_path):
    monkeypatch.setattr(port_claims, "claims_dir", lambda: tmp_path / "claims")


def _plan(name: str):
    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json") | {"name": name}
    return render_launch_plan(Topology.model_validate(data),
                              RenderContext(run_dir=Path(f"/run/{name}")))


def test_a_second_up_of_a_graph_name_is_refused_naming_the_holder(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    held = RunLock.acquire(run)
    try:
        with pytest.raises(PreflightError) as refused:
            RunLock.acquire(run)
        message = str(refused.value)
        assert f"graph 'gr' is already starting or running (pid {os.getpid()} holds" in message
        assert "dis-serve down gr" in message and "\n" not in message
    finally:
        held.release()


def test_the_name_is_free_again_once_its_holder_releases_it(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    RunLock.acquire(run).release()
    RunLock.acquire(run).release()
    assert lock_holder(run) is None


def test_a_graph_that_is_starting_is_found_and_active_before_it_has_any_state(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    held = RunLock.acquire(run)
    try:
        assert lock_holder(run) == os.getpid()
        assert not run.state_file.exists()
        assert is_active(run)
        assert find_run("gr", tmp_path).path == run.path
        assert find_run(None, tmp_path).path == run.path
    finally:
        held.release()
    assert not is_active(run)


def test_deleting_a_running_graphs_run_directory_does_not_free_its_name(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    held = RunLock.acquire(run)
    try:
        shutil.rmtree(run.path)
        with pytest.raises(PreflightError):
            RunLock.acquire(run)
    finally:
        held.release()


def test_two_graphs_of_different_names_cannot_claim_the_same_ports(tmp_path):
    first = RunLock.acquire(RunDir.for_graph("aa", tmp_path))
    second = RunLock.acquire(RunDir.for_graph("bb", tmp_path))
    try:
        claim_ports(_plan("aa"), first)
        with pytest.raises(PreflightError) as refused:
            claim_ports(_plan("bb"), second)
        message = str(refused.value)
        assert message.startswith("port 2379 for etcd (coordination.etcd.client_port) is "
                                  "already in use by graph 'aa' (starting or running")
        assert "set coordination.etcd.client_port to a free port" in message
    finally:
        first.release()
        second.release()


def test_a_claim_ends_with_its_graphs_lock_however_the_graph_ended(tmp_path):
    first = RunLock.acquire(RunDir.for_graph("aa", tmp_path))
    claim_ports(_plan("aa"), first)
    first.release()  # as the kernel does when its holder dies
    second = RunLock.acquire(RunDir.for_graph("bb", tmp_path))
    try:
        claim_ports(_plan("bb"), second)
        assert len(list((tmp_path / "claims").glob("*.json"))) == 1
    finally:
        second.release()


def test_a_graph_may_claim_its_own_ports_again(tmp_path):
    lock = RunLock.acquire(RunDir.for_graph("aa", tmp_path))
    try:
        claim_ports(_plan("aa"), lock)
        claim_ports(_plan("aa"), lock)
    finally:
        lock.release()


def test_status_of_a_graph_still_preparing_says_it_is_starting(tmp_path):
    from dis_serve.launch.status import GraphPhase
    from dis_serve.placements.local.handle import LocalHandle

    run = RunDir.for_graph("gr", tmp_path)
    held = RunLock.acquire(run)
    try:
        observed = LocalHandle(run).status()
        assert observed.phase is GraphPhase.STARTING and observed.verdict.exit_code == 0
        assert observed.supervisor == f"up pid {os.getpid()}, preparing"
    finally:
        held.release()
