"""A detached graph whose state.json is torn (truncated, or overwritten with random bytes)
while it serves: `status` says which file cannot be read and exits non-zero, and `down` still
finds the graph's processes (through its lock) and stops every one."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import dis_serve_at, wait_until
from dis_serve.launch.process import same_process
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphStatus
from relocate import relocated_demo

pytestmark = pytest.mark.integration
NAME = "it-torn"


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """The demo graph, detached, and its state as recorded before anything tore it."""
    root = tmp_path_factory.mktemp("torn")
    topology = root / "graph.yaml"
    topology.write_text(yaml.safe_dump(relocated_demo(NAME, 18220)))
    home = root / "home"
    up = dis_serve_at(home, "up", str(topology), "--detach")
    assert up.returncode == 0, up.stderr
    run = RunDir.for_graph(NAME, home)
    state = run.read_state()
    assert state is not None
    yield home, run, state
    dis_serve_at(home, "down", NAME)


def _assert_status_names_the_torn_file(home: Path, run: RunDir) -> None:
    for args in (("status", NAME), ("status", NAME, "--json")):
        status = dis_serve_at(home, *args)
        lines = [line for line in status.stderr.splitlines() if line.strip()]
        assert status.returncode == 1 and len(lines) == 1, (args, status)
        assert f"{run.state_file} cannot be read" in lines[0] and "Traceback" not in status.stderr


def test_status_names_a_truncated_state_file_and_exits_1(graph):
    home, run, _state = graph
    text = run.state_file.read_bytes()
    run.state_file.write_bytes(text[:len(text) // 2])
    _assert_status_names_the_torn_file(home, run)


def test_status_names_a_state_file_of_random_bytes_and_exits_1(graph):
    home, run, _state = graph
    run.state_file.write_bytes(os.urandom(4096))
    _assert_status_names_the_torn_file(home, run)


def _running(state: GraphStatus) -> list[str]:
    return [p.name for p in state.processes if p.pid and same_process(p.pid, p.create_time)]


def test_down_stops_every_process_of_a_graph_whose_state_file_is_torn(graph):
    home, run, state = graph
    run.state_file.write_bytes(b"{\"name\": \"it-to")
    assert _running(state) == [p.name for p in state.processes]
    supervisor = psutil.Process(state.supervisor_pid)
    down = dis_serve_at(home, "down", NAME)
    assert down.returncode == 0, down.stderr
    assert f"stopped {NAME}" in down.stdout
    assert wait_until(lambda: not _running(state), timeout=10), _running(state)
    assert not supervisor.is_running() or supervisor.status() == psutil.STATUS_ZOMBIE
