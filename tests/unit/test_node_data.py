"""Who owns a head node's etcd/NATS data directory (launch/node_data.py), tested with real
processes: a child process claims a directory (the flock an agent takes), and is SIGKILLed
as a keeper can be. A directory whose owner lives is never removed; one whose owner died is
removed by the next start of the same graph, by `down`, or by `clear-data` (the Slurm batch
script's exit)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from conftest import GRAPHS, assert_one_line_error
from dis_serve.errors import RunError
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.node_data import (
    claim_data_dir,
    coordination_data_dir,
    lock_file,
    remove_stale_data_dirs,
    remove_unowned,
)
from dis_serve.launch.rundir import RunDir
from dis_serve.topology import Topology

# A process that claims the directory, writes etcd's "data", forks one child (a keeper's
# supervisor shares the lock), says so, and waits to be killed.
_OWNER = textwrap.dedent("""
    import os, sys, time
    from pathlib import Path
    from dis_serve.launch.node_data import claim_data_dir
    path = Path(sys.argv[1])
    claim = claim_data_dir(path, sys.argv[2])
    (path / "member").write_text("wal")
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
    print(child, flush=True)
    time.sleep(600)
""")


class Owner:
    """A real process (and its forked child) holding a data directory's lock."""

    def __init__(self, path: Path, graph: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _OWNER, str(path), graph],
                                     stdout=subprocess.PIPE, text=True,
                                     env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
        line = self.proc.stdout.readline()
        assert line.strip().isdigit(), f"the owner did not start: {line!r}"
        self.child = int(line)

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def kill_child(self) -> None:
        os.kill(self.child, signal.SIGKILL)
        _reap(self.child)


def _reap(pid: int) -> None:
    """Until the killed child is gone or a zombie (which holds no file any more): once its
    parent is dead, init reaps it, when it does."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.02)
    raise AssertionError(f"pid {pid} still runs after SIGKILL")


@pytest.fixture
def owners():
    started: list[Owner] = []

    def start(path: Path, graph: str) -> Owner:
        started.append(Owner(path, graph))
        return started[-1]
    yield start
    for owner in started:
        if owner.proc.poll() is None:
            owner.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner.child, signal.SIGKILL)


def _base(tmp_path: Path) -> Path:
    return tmp_path / "dis-serve-me"


def test_a_live_owners_directory_is_not_removed_by_down_nor_by_a_sweep(tmp_path, owners):
    path = _base(tmp_path) / "demo-7"
    owners(path, "demo")
    assert not remove_unowned(path)
    assert remove_stale_data_dirs(path.parent, "demo") == []
    assert (path / "member").read_text() == "wal"


def test_a_second_start_while_the_owner_lives_is_refused_naming_its_pid(tmp_path, owners):
    path = _base(tmp_path) / "demo"
    owner = owners(path, "demo")
    with pytest.raises(RunError, match=rf"in use by pid {owner.proc.pid} .*graph 'demo'"):
        claim_data_dir(path, "demo")
    assert (path / "member").read_text() == "wal"


def test_the_forked_supervisor_keeps_the_directory_owned_after_its_keeper_is_sigkilled(
        tmp_path, owners):
    path = _base(tmp_path) / "demo-7"
    owner = owners(path, "demo")
    owner.kill()  # the keeper; its child (the supervisor) serves on with the same lock
    assert not remove_unowned(path)
    assert path.is_dir()
    owner.kill_child()
    assert remove_unowned(path)
    assert not path.exists() and not lock_file(path).exists()


def test_down_removes_the_directory_of_a_sigkilled_owner(tmp_path, owners):
    path = _base(tmp_path) / "demo-7"
    owner = owners(path, "demo")
    owner.kill()
    owner.kill_child()
    assert remove_unowned(path)
    assert not path.exists() and not lock_file(path).exists()


def test_the_next_start_removes_the_graphs_directories_left_by_killed_owners(tmp_path,
                                                                            owners):
    base = _base(tmp_path)
    for job in ("3", "4"):
        owner = owners(base / f"demo-{job}", "demo")
        owner.kill()
        owner.kill_child()
    claim = claim_data_dir(base / "demo-5", "demo")
    assert sorted(p.name for p in base.iterdir()) == ["demo-5", "demo-5.lock"]
    claim.release()
    assert list(base.iterdir()) == []


def test_a_start_leaves_live_runs_and_other_graphs_alone(tmp_path, owners):
    base = _base(tmp_path)
    owners(base / "demo-3", "demo")  # a live job of the same graph
    owners(base / "other", "other")
    dead = owners(base / "other-9", "other")
    dead.kill()
    dead.kill_child()
    claim = claim_data_dir(base / "demo-5", "demo")
    assert {p.name for p in base.iterdir() if p.is_dir()} == {
        "demo-3", "demo-5", "other", "other-9"}
    claim.release()


def test_the_owners_directory_starts_empty_and_goes_on_release(tmp_path):
    path = _base(tmp_path) / "demo"
    path.mkdir(parents=True)
    (path / "member").write_text("an earlier job's registrations")
    claim = claim_data_dir(path, "demo")
    assert list(path.iterdir()) == []
    claim.release()
    assert not path.exists() and not lock_file(path).exists()


def _head_run_dir(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    """A Slurm job's run directory and, as its batch shell sees it, the head's data
    directory (TMPDIR and SLURM_JOB_ID as srun passes them on)."""
    topo = load_model_file(Topology, GRAPHS / "demo-3node-slurm.yaml")
    run = RunDir(tmp_path / "run")
    run.prepare()
    run.topology_file.write_text(topo.model_dump_json())
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))
    monkeypatch.setenv("SLURM_JOB_ID", "41")
    return run.path, coordination_data_dir(topo, os.environ)


def test_the_job_ends_clear_data_removes_what_a_killed_head_agent_left(tmp_path, owners,
                                                                       monkeypatch, run_cli):
    run_dir, path = _head_run_dir(tmp_path, monkeypatch)
    owner = owners(path, "demo-3node-slurm")
    owner.kill()
    owner.kill_child()
    result = run_cli("clear-data", run_dir)
    assert result.exit_code == 0 and result.stdout.startswith(f"removed {path}")
    assert not path.exists()


def test_clear_data_leaves_a_live_head_agents_data(tmp_path, owners, monkeypatch, run_cli):
    run_dir, path = _head_run_dir(tmp_path, monkeypatch)
    owners(path, "demo-3node-slurm")
    result = run_cli("clear-data", run_dir)
    assert (result.exit_code, result.stdout) == (0, "")
    assert (path / "member").read_text() == "wal"


def test_down_of_a_hosts_graph_on_its_head_removes_what_its_killed_agent_left(
        tmp_path, owners, monkeypatch, run_cli):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))
    assert run_cli("prepare", GRAPHS / "demo-two-hosts.yaml").exit_code == 0
    path = coordination_data_dir(load_model_file(Topology, GRAPHS / "demo-two-hosts.yaml"),
                                 os.environ)
    owner = owners(path, "demo-two-hosts")  # the head's agent, then killed outright
    owner.kill()
    owner.kill_child()
    down = run_cli("down", "demo-two-hosts")
    assert down.exit_code == 0, down
    assert down.stdout.splitlines() == ["demo-two-hosts is not running (no node agent is)",
                                        f"removed {path}, which no agent owned any more"]
    assert not path.exists()


def test_clear_data_of_a_directory_without_a_topology_says_so_in_one_line(tmp_path, run_cli):
    result = run_cli("clear-data", tmp_path)
    assert_one_line_error(result, "topology.json cannot be read", "RUN_DIR")
