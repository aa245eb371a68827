"""`up`, `status`, `logs`, `down` where no process needs to start: errors are one line, exit 2."""

from __future__ import annotations

import os

import pytest

from conftest import GRAPHS
from dis_serve.launch.process import create_time
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from dis_serve.placements.reports import RegistrationsView


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _record(home, name="g1", phase=GraphPhase.READY, *, alive=False, **extra) -> RunDir:
    """A run directory whose supervisor is gone: our pid, but a create time it never had
    (or, `alive`, the one it has: this test process stands in for a live supervisor)."""
    run = RunDir.for_graph(name, home)
    run.prepare()
    run.write_state(GraphStatus(
        name=name, namespace=f"dis-serve-{name}", run_dir=str(run.path),
        endpoint="http://127.0.0.1:18999", model_name="m", supervisor_pid=os.getpid(),
        supervisor_create_time=create_time(os.getpid()) if alive else 1.0, phase=phase,
        started_at=0.0, **extra,
        processes=[ProcessStatus(name="frontend", kind="frontend", pid=None,
                                 state=ProcessState.READY, ports={"http": 18999})]))
    run.log_file("frontend").write_text("one\n\x1b[32mtwo\x1b[0m\n")
    return run


def test_up_with_a_missing_file_fails_in_one_line(run_cli, tmp_path):
    result = run_cli("up", tmp_path / "nope.yaml", "--detach")
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nope.yaml" in result.stderr


def test_up_of_a_multi_node_trtllm_graph_points_to_slurm_and_the_cluster_targets(run_cli):
    result = run_cli("up", GRAPHS / "llama70b-h100-disagg.yaml", "--detach")
    assert result.exit_code == 2
    assert "set placement.slurm" in result.stderr
    assert "render --target hosts|slurm|k8s" in result.stderr
    assert "Traceback" not in result.stderr


def test_up_of_a_trtllm_graph_without_tensorrt_llm_says_what_to_install(run_cli):
    result = run_cli("up", GRAPHS / "llama8b-8gpu-disagg.yaml", "--detach")
    assert result.exit_code == 2
    assert "TensorRT-LLM" in result.stderr


def test_down_with_nothing_running_says_so_and_succeeds(run_cli):
    result = run_cli("down")
    assert result.exit_code == 0
    assert "no graph is running" in result.stdout


def test_status_with_no_graph_fails_with_the_next_step(run_cli):
    result = run_cli("status")
    assert result.exit_code == 2
    assert "dis-serve up" in result.stderr


def test_status_of_a_graph_whose_supervisor_died_says_it_is_gone(run_cli, home):
    _record(home)
    result = run_cli("status", "g1")
    assert result.exit_code == 1
    assert "is gone" in result.stdout
    assert "dis-serve down g1" in result.stdout


def test_down_of_a_dead_supervisors_graph_marks_it_stopped(run_cli, home):
    run = _record(home)
    result = run_cli("down", "g1")
    assert result.exit_code == 0
    assert "marked stopped" in result.stdout
    state = run.read_state()
    assert state is not None and state.phase is GraphPhase.STOPPED


def test_logs_prints_a_process_log_without_colour_codes(run_cli, home):
    _record(home)
    result = run_cli("logs", "frontend", "--name", "g1")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == ["one", "two"]


def test_logs_of_an_unknown_process_lists_the_real_ones(run_cli, home):
    _record(home)
    result = run_cli("logs", "decode-7", "--name", "g1")
    assert result.exit_code == 2
    assert "frontend" in result.stderr


def test_a_graph_name_that_does_not_exist_lists_the_known_ones(run_cli, home):
    _record(home, "g1", GraphPhase.STOPPED)
    result = run_cli("status", "other")
    assert result.exit_code == 2
    assert "g1" in result.stderr


def test_help_lists_the_launch_commands(run_cli):
    result = run_cli("--help")
    for command in ("up", "status", "logs", "down"):
        assert command in result.stdout


@pytest.fixture
def no_router_view(monkeypatch):
    """A live graph's `status` also asks etcd for the router's view: none runs here."""
    monkeypatch.setattr("dis_serve.placements.local.handle.LocalHandle.registrations",
                        lambda self: RegistrationsView(unavailable="no etcd in this test"))


def test_status_of_a_degraded_graph_exits_3_and_says_what_is_wrong(run_cli, home,
                                                                     no_router_view):
    _record(home, phase=GraphPhase.DEGRADED, alive=True,
            problems=["decode-1: crashed 5 times within 300 s; giving up"])
    result = run_cli("status", "g1")
    assert result.exit_code == 3
    assert "g1: degraded" in result.stdout
    assert "degraded: decode-1: crashed 5 times" in result.stdout


def test_status_of_a_failed_graph_exits_1(run_cli, home):
    _record(home, phase=GraphPhase.FAILED, error="frontend crashed 5 times")
    result = run_cli("status", "g1")
    assert result.exit_code == 1
    assert "error: frontend crashed 5 times" in result.stdout


def test_status_of_a_ready_graph_exits_0(run_cli, home, no_router_view):
    _record(home, alive=True)
    assert run_cli("status", "g1").exit_code == 0


def test_up_of_more_workers_than_memory_holds_is_refused_in_one_line(run_cli, tmp_path, home,
                                                                    monkeypatch):
    import types

    import yaml

    from dis_serve.launch import preflight

    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["pools"]["decode"]["workers"] = 4096
    data["hardware"]["nodes"] = 513  # the GPUs the mocker stands in for
    topo = tmp_path / "wide.yaml"
    topo.write_text(yaml.safe_dump(data))
    monkeypatch.setattr(preflight.psutil, "virtual_memory",
                        lambda: types.SimpleNamespace(available=64 * 1024**3))
    result = run_cli("up", topo, "--detach")
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "4101 processes (4097 mocker workers at about 30 MiB each) need about" in lines[0]
    assert "64.0 GiB available" in lines[0]
    assert not RunDir.for_graph("demo", home).state_file.exists()


def test_up_without_haproxy_names_frontend_balancer_and_both_fixes_in_one_line(
        run_cli, home, monkeypatch):
    from conftest import assert_one_line_error
    from dis_serve.launch import preflight

    found = preflight.find_binary
    monkeypatch.setattr(preflight, "find_binary",
                        lambda name: None if name == "haproxy" else found(name))
    result = run_cli("up", GRAPHS / "demo.yaml", "--detach")
    assert_one_line_error(result, "haproxy not found", "frontend.balancer is true",
                          "apt-get install haproxy", "set frontend.balancer: false")
    assert not RunDir.for_graph("demo", home).state_file.exists()  # nothing started
