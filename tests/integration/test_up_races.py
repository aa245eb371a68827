"""`up` racing `up` and `down` from other shells: one owner per graph name and per port,
and a graph that is still starting can be stopped."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase
from relocate import relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")


def _topology_file(tmp_path: Path, name: str, base: int, file: str | None = None) -> Path:
    path = tmp_path / (file or f"{name}.yaml")
    path.write_text(yaml.safe_dump(relocated_demo(name, base)))
    return path


def _up(home: Path, topo: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([DIS_SERVE, "up", str(topo), "--detach"], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=os.environ | {"DIS_SERVE_HOME": str(home)})


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=120,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)}, check=False)


def _processes_of(run_dir: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                str(run_dir) in part for part in proc.info["cmdline"] or []):
            found.append(proc)
    return found


def _finish(*ups: subprocess.Popen[str]) -> list[tuple[int, str, str]]:
    return [(up.wait(timeout=120), *up.communicate(timeout=10)) for up in ups]


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.strip()]


def test_two_ups_of_one_name_at_once_give_one_graph_and_a_one_line_refusal(tmp_path):
    home = tmp_path / "home"
    topo = _topology_file(tmp_path, "it-twice", 18800)
    results = _finish(_up(home, topo), _up(home, topo))
    run = RunDir.for_graph("it-twice", home)
    try:
        codes = sorted(code for code, _, _ in results)
        assert codes == [0, 2], results
        loser = next(err for code, _, err in results if code == 2)
        assert _error_lines(loser) == [_error_lines(loser)[0]]
        assert "graph 'it-twice' is already starting or running" in loser
        state = run.read_state()
        assert state is not None and state.phase is GraphPhase.READY
        # Every process of the graph descends from that one supervisor.
        family = {p.pid for p in psutil.Process(state.supervisor_pid).children(recursive=True)}
        assert {p.pid for p in _processes_of(run.path)} <= family
    finally:
        down = _cli(home, "down", "it-twice")
    assert down.returncode == 0, down.stderr
    assert _processes_of(run.path) == []


def test_two_graphs_on_the_same_ports_at_once_the_loser_gets_the_port_line(tmp_path):
    home = tmp_path / "home"
    first = _topology_file(tmp_path, "it-port-a", 18820)
    second = _topology_file(tmp_path, "it-port-b", 18820)
    results = _finish(_up(home, first), _up(home, second))
    try:
        assert sorted(code for code, _, _ in results) == [0, 2], results
        loser = next(err for code, _, err in results if code == 2)
        lines = _error_lines(loser)
        assert len(lines) == 1, loser
        assert "port 188" in lines[0] and "already in use" in lines[0]
    finally:
        _cli(home, "down", "--all")
    for name in ("it-port-a", "it-port-b"):
        assert _processes_of(RunDir.for_graph(name, home).path) == []


def test_down_right_after_up_stops_the_graph_that_is_starting(tmp_path):
    home = tmp_path / "home"
    run = RunDir.for_graph("it-early", home)
    up = _up(home, _topology_file(tmp_path, "it-early", 18840))
    # As soon as `up` holds the name: before it has written any state or started anything.
    lock = run.path.parent / "it-early.lock"
    deadline = time.monotonic() + 30
    while not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    down = _cli(home, "down", "it-early")
    code, _out, err = _finish(up)[0]
    assert down.returncode == 0, down.stderr
    assert "is not running" not in down.stdout
    assert code in (1, 130), err
    assert "Traceback" not in err
    assert len(_error_lines(err)) == 1, err
    time.sleep(1.0)  # nothing comes up afterwards
    assert _processes_of(run.path) == []
    state = run.read_state()
    assert state is None or state.phase.finished
