"""`dis-serve up/status/logs/down` from separate shells, against real etcd, NATS and Dynamo."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import wait_until
from dis_serve.launch.process import same_process
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from dis_serve.placements.local.stop import stop_run
from relocate import relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")


def _topology_file(tmp_path: Path, name: str, base: int) -> Path:
    """The demo graph under another name, on ports base..base+11 (tests use 18000-18999)."""
    data = relocated_demo(name, base)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=timeout,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)}, check=False)


def _state(home: Path, name: str) -> GraphStatus:
    state = RunDir.for_graph(name, home).read_state()
    assert state is not None
    return state


def _processes_of(run_dir: Path) -> list[int]:
    """Every live process whose command line mentions the run directory."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        if any(str(run_dir) in part for part in proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


def _chat(endpoint: str, model: str, **extra) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": "w3 w4 w5"}],
            "max_tokens": 8} | extra
    response = httpx.post(f"{endpoint}/v1/chat/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_detached_demo_serves_chat_and_streaming_and_down_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    up = _cli(home, "up", str(_topology_file(tmp_path, "it-demo", 18000)), "--detach")
    assert up.returncode == 0, up.stderr
    assert "curl -s http://127.0.0.1:18000/v1/chat/completions" in up.stdout
    state = _state(home, "it-demo")
    try:
        reply = _chat(state.endpoint, state.model_name)
        assert reply["choices"][0]["message"]["content"].split()
        assert reply["usage"]["completion_tokens"] == 8

        chunks = []
        with httpx.stream("POST", f"{state.endpoint}/v1/chat/completions", timeout=30, json={
                "model": state.model_name, "stream": True, "max_tokens": 6,
                "messages": [{"role": "user", "content": "w9 w10"}]}) as response:
            assert response.status_code == 200
            chunks = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        assert chunks[-1] == "[DONE]"
        words = [json.loads(c)["choices"][0]["delta"].get("content") for c in chunks[:-1]]
        assert len([w for w in words if w]) == 6

        status = _cli(home, "status", "it-demo")
        assert status.returncode == 0
        assert "serving demo-model at http://127.0.0.1:18000" in status.stdout
        for name in ("etcd", "nats", "frontend", "prefill-0", "decode-0"):
            assert name in status.stdout

        logs = _cli(home, "logs", "frontend", "--name", "it-demo", "-n", "5")
        assert logs.returncode == 0 and logs.stdout.strip()
    finally:
        down = _cli(home, "down", "it-demo")
    assert down.returncode == 0, down.stderr
    assert "stopped it-demo" in down.stdout
    for proc in state.processes:
        assert not same_process(proc.pid or 0, proc.create_time), proc.name
    assert _processes_of(Path(state.run_dir)) == []
    assert _state(home, "it-demo").phase is GraphPhase.STOPPED


def test_two_graphs_run_side_by_side_on_loopback_and_down_all_stops_both(tmp_path):
    home = tmp_path / "home"
    try:
        for name, base in (("it-side-a", 18050), ("it-side-b", 18070)):
            up = _cli(home, "up", str(_topology_file(tmp_path, name, base)), "--detach")
            assert up.returncode == 0, up.stderr
        states = [_state(home, "it-side-a"), _state(home, "it-side-b")]
        assert states[0].namespace != states[1].namespace
        for state in states:
            assert _chat(state.endpoint, state.model_name)["choices"]
        pids = {p.pid for s in states for p in s.processes}
        listening = [c.laddr for c in psutil.net_connections(kind="inet")
                     if c.status == psutil.CONN_LISTEN and c.pid in pids]
        assert len(listening) >= 12  # per graph: etcd x2, NATS, frontend, 2 system ports
        assert {addr.ip for addr in listening} == {"127.0.0.1"}
    finally:
        down = _cli(home, "down", "--all")
    assert down.returncode == 0
    assert "stopped it-side-a" in down.stdout and "stopped it-side-b" in down.stdout
    # Each supervisor stopped its graph itself, none had to be killed.
    assert "without recording the stop" not in down.stdout, down.stdout
    for state in states:
        assert _processes_of(Path(state.run_dir)) == []


def test_a_taken_port_is_refused_before_anything_starts(tmp_path):
    home = tmp_path / "home"
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", 18100))
        squatter.listen()
        result = _cli(home, "up", str(_topology_file(tmp_path, "it-port", 18100)), "--detach")
    assert result.returncode == 2
    assert "port 18100" in result.stderr and "frontend.port" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not RunDir.for_graph("it-port", home).state_file.exists()
    assert _processes_of(RunDir.for_graph("it-port", home).path) == []


def _chat_ok(endpoint: str, model: str) -> bool:
    try:
        return httpx.post(f"{endpoint}/v1/chat/completions", timeout=5, json={
            "model": model, "max_tokens": 4,
            "messages": [{"role": "user", "content": "w3"}]}).status_code == 200
    except httpx.HTTPError:
        return False


def test_a_killed_supervisor_of_a_detached_graph_is_replaced_and_serves_within_10_s(
        tmp_path, capsys):
    home = tmp_path / "home"
    up = _cli(home, "up", str(_topology_file(tmp_path, "it-kill", 18150)), "--detach")
    assert up.returncode == 0, up.stderr
    first = _state(home, "it-kill")
    outcomes: list[tuple[float, bool]] = []
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            outcomes.append((time.monotonic(), _chat_ok(first.endpoint, first.model_name)))

    thread = threading.Thread(target=load)
    thread.start()
    try:
        time.sleep(1.0)
        killed = time.monotonic()
        os.kill(first.supervisor_pid, signal.SIGKILL)
        assert wait_until(lambda: (s := RunDir.for_graph("it-kill", home).read_state())
                          is not None and s.supervisor_pid != first.supervisor_pid
                          and s.phase is GraphPhase.READY, timeout=10)
        assert wait_until(lambda: outcomes[-1][1], timeout=10 - (time.monotonic() - killed))
        back = time.monotonic()
        status = _cli(home, "status", "it-kill")
        assert status.returncode == 0, status.stdout + status.stderr
        assert "it-kill: ready" in status.stdout
        failed = sum(1 for at, ok in outcomes if killed <= at <= back and not ok)
        with capsys.disabled():
            print(f"\nsupervisor SIGKILL: serving again after {back - killed:.1f} s, "
                  f"{failed} requests failed meanwhile")
    finally:
        stop.set()
        thread.join()
        down = _cli(home, "down", "it-kill")
    assert down.returncode == 0, down.stderr
    assert "stopped it-kill" in down.stdout
    assert _processes_of(Path(first.run_dir)) == []
    assert _state(home, "it-kill").phase is GraphPhase.STOPPED


_NOTE_SIGTERM = """
import pathlib, signal, sys, time
mark = pathlib.Path(sys.argv[1])
def note(*_):
    mark.write_text("SIGTERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, note)
mark.write_text("ready")
time.sleep(300)
"""


def test_down_stops_processes_a_dead_supervisor_left_behind(tmp_path):
    # Stand-ins for children that outlived their supervisor (a grandchild, or a platform
    # without PR_SET_PDEATHSIG): real processes, each leading its own group as ours do.
    home = tmp_path / "home"
    run = RunDir.for_graph("it-left", home)
    run.prepare()
    # Each notes the signal that stopped it: the sweep must ask (SIGTERM) before it kills.
    marks = [tmp_path / f"sleeper-{i}" for i in range(2)]
    sleepers = [subprocess.Popen([sys.executable, "-c", _NOTE_SIGTERM, str(mark)],
                                 start_new_session=True) for mark in marks]
    try:
        assert wait_until(lambda: all(mark.exists() for mark in marks), timeout=10)
        run.write_state(GraphStatus(
            name="it-left", namespace="dis-serve-it-left", run_dir=str(run.path),
            endpoint="http://127.0.0.1:18199", model_name="m", supervisor_pid=os.getpid(),
            supervisor_create_time=1.0, phase=GraphPhase.READY, started_at=0.0,
            processes=[ProcessStatus(name=n, kind=k, pid=p.pid,
                                     create_time=psutil.Process(p.pid).create_time(),
                                     state=ProcessState.READY)
                       for n, k, p in (("frontend", "frontend", sleepers[0]),
                                       ("decode-0", "worker", sleepers[1]))]))
        result = stop_run(run)
        assert [item.name for item in result.leftovers] == ["frontend", "decode-0"]
        for p in sleepers:
            p.wait(timeout=10)
        assert [mark.read_text() for mark in marks] == ["SIGTERM"] * 2
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


def test_foreground_up_prints_the_endpoint_and_ctrl_c_stops_everything(tmp_path):
    home = tmp_path / "home"
    run = RunDir.for_graph("it-fg", home)
    proc = subprocess.Popen([DIS_SERVE, "up", str(_topology_file(tmp_path, "it-fg", 18600))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=os.environ | {"DIS_SERVE_HOME": str(home)})
    try:
        assert wait_until(lambda: (s := run.read_state()) is not None
                           and s.phase is GraphPhase.READY, timeout=60)
        state = _state(home, "it-fg")
        assert _chat(state.endpoint, state.model_name)["choices"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "ready in" in out and "curl -s http://127.0.0.1:18600/v1/chat/completions" in out
    assert "stopped it-fg" in out
    assert _processes_of(Path(state.run_dir)) == []
    assert _state(home, "it-fg").phase is GraphPhase.STOPPED
