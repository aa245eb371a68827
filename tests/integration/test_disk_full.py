"""A full disk, on a real small tmpfs under DIS_SERVE_HOME (mounted for each test, unmounted
in its teardown; needs root): `up` refuses a disk too small in one line with the numbers,
and a disk that fills while the graph serves leaves `down` and `status` telling the truth,
one line each, never a traceback."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import GRAPHS, dis_serve_at, wait_until
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.topology import Topology
from relocate import relocate, relocated_demo

pytestmark = pytest.mark.integration
BASE = 18320


@contextlib.contextmanager
def _tmpfs(path: Path, size_mib: int) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs",
                    str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=True)


def _one_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _processes_under(path: Path) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                str(path) in part for part in proc.info["cmdline"] or []):
            found.append(" ".join(proc.info["cmdline"]))
    return found


def _topology(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(relocated_demo(name, BASE)))
    return path


def test_up_on_a_disk_too_small_refuses_in_one_line_and_status_says_it_never_started(
        tmp_path):
    with _tmpfs(tmp_path / "disk", 64) as home:
        up = dis_serve_at(home, "up", str(_topology(tmp_path, "it-disk-small")), "--detach")
        assert up.returncode == 2
        line = _one_line(up)
        assert f"{home}" in line and "MiB free" in line and "etcd's preallocated WAL" in line
        assert _processes_under(home) == []
        status = dis_serve_at(home, "status", "it-disk-small")
        assert status.returncode == 1 and "never started" in _one_line(status)
        down = dis_serve_at(home, "down", "it-disk-small")
        assert down.returncode == 0 and "it-disk-small is not running" in down.stdout


def _fill(directory: Path) -> Path:
    """Write one file until the file system is full; the file (to remove afterwards)."""
    filler = directory / "filler"
    chunk = b"\0" * (1024 * 1024)
    with open(filler, "wb", buffering=0) as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(chunk)
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 4096)
    with pytest.raises(OSError) as full:
        (directory / "probe").write_bytes(b"x" * 8192)
    assert full.value.errno == errno.ENOSPC
    return filler


def test_a_disk_that_fills_while_serving_leaves_down_and_status_truthful(tmp_path):
    with _tmpfs(tmp_path / "disk", 200) as home:
        name = "it-disk-fills"
        up = dis_serve_at(home, "up", str(_topology(tmp_path, name)), "--detach")
        assert up.returncode == 0, up.stderr
        run = RunDir.for_graph(name, home)
        state = run.read_state()
        assert state is not None
        _fill(home)
        chat = httpx.post(f"{state.endpoint}/v1/chat/completions", timeout=30, json={
            "model": state.model_name, "max_tokens": 4,
            "messages": [{"role": "user", "content": "w3 w4"}]}, trust_env=False)
        assert chat.status_code == 200, chat.text  # serving goes on

        down = dis_serve_at(home, "down", name)
        assert down.returncode == 0 and "Traceback" not in down.stderr, down.stderr
        assert wait_until(lambda: _processes_under(home) == [], timeout=10)
        status = dis_serve_at(home, "status", name, "--json")
        assert status.returncode == 0, status.stderr
        observed = json.loads(status.stdout)
        assert observed["phase"] == "stopped"
        assert {p["state"] for p in observed["processes"]} == {"stopped"}


def test_a_head_nodes_agent_whose_data_dir_is_too_small_refuses_in_one_line(tmp_path):
    """A hosts graph's head node script on a node whose coordination.data_dir is a small
    disk: its agent says so in one line before it starts a process."""
    with _tmpfs(tmp_path / "disk", 64) as data_dir:
        data = relocate(yaml.safe_load((GRAPHS / "demo-two-hosts.yaml").read_text()),
                        "it-disk-node", BASE + 40)
        data["coordination"]["data_dir"] = str(data_dir)
        run_dir = tmp_path / "run"
        run_dir.mkdir()
        for name, text in render_hosts_files(Topology.model_validate(data)).items():
            (run_dir / name).write_text(text)
        path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
        head = subprocess.run(["bash", str(run_dir / "node-head.sh")], capture_output=True,
                              text=True, timeout=60, check=False,
                              env=os.environ | {"DIS_SERVE_RUN_DIR": str(run_dir),
                                                "PATH": path})
        assert head.returncode == 2, head
        line = _one_line(head)
        assert "it-disk-node on node head" in line and str(data_dir) in line, line
        assert "etcd's preallocated WAL" in line and "coordination.data_dir" in line, line
        assert _processes_under(run_dir) == [] and _processes_under(data_dir) == []
