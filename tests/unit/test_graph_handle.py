"""The graph handle: which implementation a graph gets, what `status` exits with, and the
one line each supervisor event prints as."""

from __future__ import annotations

import time

import pytest

from conftest import GRAPHS
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch import events
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase
from dis_serve.placements.hosts.handle import HostsHandle
from dis_serve.placements.local.handle import LocalHandle
from dis_serve.placements.registry import handle_for, handle_for_run
from dis_serve.placements.reports import ObservedGraph, StartOptions, StatusVerdict
from dis_serve.placements.slurm.handle import SlurmHandle
from dis_serve.placements.slurm.queue import SlurmJob
from dis_serve.topology import PlacementKind, Topology


def _graph(name: str) -> Topology:
    return load_model_file(Topology, GRAPHS / name)


def _observed(phase: GraphPhase, *, alive: bool = True) -> ObservedGraph:
    return ObservedGraph(name="g1", placement=PlacementKind.LOCAL, phase=phase, run_dir="/r",
                         model_name="m", processes=[], supervisor="supervisor pid 1",
                         supervisor_alive=alive)


@pytest.mark.parametrize(("phase", "alive", "verdict"), [
    (GraphPhase.READY, True, StatusVerdict.OK),
    (GraphPhase.STARTING, True, StatusVerdict.OK),
    (GraphPhase.STOPPED, False, StatusVerdict.OK),
    (GraphPhase.DEGRADED, True, StatusVerdict.DEGRADED),
    (GraphPhase.FAILED, False, StatusVerdict.FAILED),
    (GraphPhase.READY, False, StatusVerdict.FAILED),
])
def test_the_status_verdict_follows_the_phase_and_whether_the_supervisor_lives(
        phase, alive, verdict):
    assert _observed(phase, alive=alive).verdict is verdict


def test_status_exit_codes_are_0_ok_1_failed_3_degraded():
    assert [v.exit_code for v in StatusVerdict] == [0, 1, 3]


def test_a_run_directory_with_a_slurm_job_record_gets_the_slurm_handle(tmp_path):
    run = RunDir.for_graph("g1", tmp_path)
    run.prepare()
    assert isinstance(handle_for_run(run), LocalHandle)
    run.slurm_job_file.write_text(SlurmJob(
        name="g1", job_id="7", run_dir=str(run.path), model_name="m",
        submitted_at=time.time(), processes=["etcd"]).model_dump_json())
    handle = handle_for_run(run)
    assert isinstance(handle, SlurmHandle)
    assert handle.process_names() == ["etcd", "slurm-7"]


def test_a_slurm_topology_gets_the_slurm_handle_and_a_local_one_the_local(tmp_path):
    assert isinstance(handle_for(_graph("demo.yaml"), tmp_path), LocalHandle)
    assert isinstance(handle_for(_graph("demo-slurm.yaml"), tmp_path), SlurmHandle)


def test_a_hosts_topology_gets_the_hosts_handle_and_so_does_its_prepared_run(tmp_path):
    handle = handle_for(_graph("demo-two-hosts.yaml"), tmp_path)
    assert isinstance(handle, HostsHandle)
    handle.start(StartOptions())
    assert isinstance(handle_for_run(handle.run), HostsHandle)


@pytest.mark.parametrize(("event", "line"), [
    (events.Ready(1.234, "http://h:1"), "ready after 1.23 s: http://h:1"),
    (events.Restarting("decode-0", "exited with status 1", 2.0),
     "decode-0 exited with status 1; restarting in 2 s"),
    (events.Restarted("decode-0", 42, 3), "decode-0 restarted (pid 42, restart 3)"),
    (events.Hung("decode-0", 3), "decode-0 left 3 health probes in a row unanswered; "
                                 "restarting it"),
    (events.GaveUp("decode-0", "crashed 5 times", "/l", "  x", 60.0),
     "degraded: decode-0 crashed 5 times; trying it again in 60 s; last lines of /l:\n  x"),
    (events.RegistrationsLost("decode", "prefill 1/1, decode 0/2", ["decode-0", "decode-1"]),
     "the router lost decode workers that run and are ready (prefill 1/1, decode 0/2): "
     "restarting decode-0, decode-1 so they register again"),
])
def test_each_supervisor_event_prints_as_one_line_from_one_place(event, line):
    assert events.describe(event) == line
