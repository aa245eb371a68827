"""`dis-serve up` of graphs/demo-3node-slurm.yaml on the multi-node test bed: three Slurm
nodes, each its own network namespace (tests/netns_cluster.py). etcd, NATS, the frontend and
the prefill worker run in node n1's namespace, one decode worker in each of n2's and n3's;
every process listens on its node's eth0 address; chat completions are served at the head
node's address; `down` leaves no process of the graph in any namespace."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import GRAPHS, wait_until
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.slurm_jobs import read_job
from netns_cluster import NetnsCluster
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE = 18700
HEAD = "198.18.0.11"


def _topology(tmp_path: Path, name: str) -> Path:
    data = relocate(yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text()), name, BASE)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(cluster: NetnsCluster, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=240,
                          env=cluster.env | {"DIS_SERVE_HOME": str(home)}, check=False)


def _graph_processes(cluster: NetnsCluster, node: str, run_dir: Path) -> list[str]:
    """Command lines of the processes in the node's namespace that belong to the graph: the
    job's slurmstepd daemons and whatever names the run directory or a Dynamo module."""
    found = []
    for pid in cluster.processes_in(node):
        try:
            proc = psutil.Process(pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            line = " ".join(proc.cmdline())
        except psutil.NoSuchProcess:
            continue
        if ("slurmstepd" in line or str(run_dir) in line or "dynamo." in line
                or "etcd" in line or "nats-server" in line):
            found.append(line)
    return found


def _listening(cluster: NetnsCluster, node: str) -> dict[str, set[str]]:
    """Program (etcd, nats-server, dynamo.frontend, dynamo.mocker) -> addresses it listens on
    inside the node's namespace; Slurm's own (slurmd, srun's I/O ports) left out."""
    out = cluster.run_in(node, "ss", "-H", "-ltnp").stdout
    found: dict[str, set[str]] = {}
    for line in out.splitlines():
        fields = line.split()
        address = fields[3].rsplit(":", 1)[0]
        pid = int(fields[-1].split("pid=")[1].split(",")[0])
        proc = psutil.Process(pid)
        if proc.name() in ("slurmd", "slurmstepd", "srun"):
            continue
        cmdline = proc.cmdline()
        name = next((w for w in cmdline if w.startswith("dynamo.")), Path(cmdline[0]).name)
        found.setdefault(name, set()).add(address)
    return found


def test_a_three_node_graph_serves_at_the_head_address_and_down_leaves_no_process(
        netns_cluster, tmp_path):
    home = tmp_path / "home"
    up = _cli(netns_cluster, home, "up", str(_topology(tmp_path, "it-3node")), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    run = RunDir.for_graph("it-3node", home)
    job = read_job(run)
    assert job is not None
    endpoint = f"http://{HEAD}:{BASE}"
    assert "ready in" in up.stdout and endpoint in up.stdout
    try:
        chat = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                          json={"model": "demo-model", "max_tokens": 8,
                                "messages": [{"role": "user", "content": "w3 w4 w5"}]})
        assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 8
        status = _cli(netns_cluster, home, "status", "it-3node")
        assert "router: prefill 1/1, decode 2/2" in status.stdout, status.stdout

        assert _listening(netns_cluster, "n1") == {
            "etcd": {HEAD}, "nats-server": {HEAD}, "dynamo.frontend": {HEAD},
            "dynamo.mocker": {HEAD}}
        assert _listening(netns_cluster, "n2") == {"dynamo.mocker": {"198.18.0.12"}}
        assert _listening(netns_cluster, "n3") == {"dynamo.mocker": {"198.18.0.13"}}
    finally:
        down = _cli(netns_cluster, home, "down", "it-3node")
    assert down.returncode == 0, down.stdout + down.stderr
    assert job.job_id not in netns_cluster.jobs()
    for node in ("n1", "n2", "n3"):
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n, run.path),
                          timeout=15), (node, _graph_processes(netns_cluster, node, run.path))
    assert os.path.isdir(run.path)
