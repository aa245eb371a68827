"""`render --target hosts` on the multi-node test bed: the demo-3node graph placed on three
named hosts (198.18.0.11-13), each node's generated script started inside its own network
namespace, as on three machines; each script hands over to its node's agent. Chat
completions are served at the head node's address; a worker killed on n3 is restarted by
n3's agent; SIGTERM to the scripts leaves no process of the graph in any namespace."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import GRAPHS, wait_until
from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.launch.model_card import write_model_card
from dis_serve.render.hosts import render_hosts_files
from dis_serve.topology import Topology
from netns_cluster import NetnsCluster
from relocate import relocate

pytestmark = pytest.mark.integration
BASE = 18750
NODES = ("n1", "n2", "n3")


def _topology() -> Topology:
    data = relocate(yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text()),
                    "it-hosts3", BASE)
    data["placement"] = {"hosts": {"nodes": [
        {"name": name, "address": f"198.18.0.1{k}"} for k, name in enumerate(NODES, 1)]}}
    return Topology.model_validate(data)


def _served(url: str) -> bool:
    try:
        ready = httpx.get(f"{url}/v1/models/demo-model/ready", timeout=2, trust_env=False)
    except httpx.HTTPError:
        return False
    return ready.status_code == 200


def _graph_processes(cluster: NetnsCluster, node: str, run_dir: Path) -> list[str]:
    """The node's processes other than its slurmd: what the script started."""
    found = []
    for pid in cluster.processes_in(node):
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and proc.name() != "slurmd":
                found.append(" ".join(proc.cmdline()))
        except psutil.NoSuchProcess:
            continue
    return found


def _mocker_pid(cluster: NetnsCluster, node: str) -> int:
    for pid in cluster.processes_in(node):
        with contextlib.suppress(psutil.NoSuchProcess):
            if "dynamo.mocker" in psutil.Process(pid).cmdline():
                return pid
    raise AssertionError(f"no mocker in {node}")


def test_three_node_scripts_each_in_its_namespace_serve_and_stop_cleanly(netns_cluster,
                                                                         tmp_path):
    topo = _topology()
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, text in render_hosts_files(topo).items():
        (run_dir / name).write_text(text)
    write_model_card(run_dir / "model-card", topo.model.resolved_architecture(),
                     name=topo.model.id)
    write_cluster_ca(topo, run_dir)  # what `render` writes into tls/ beside the scripts
    # The scripts call etcd, nats-server and python3 by name, as on a node that has them.
    env = os.environ | {"DIS_SERVE_RUN_DIR": str(run_dir),
                        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    scripts = {}
    for node in NODES:
        log = (run_dir / f"node-{node}.out").open("wb")
        scripts[node] = netns_cluster.popen_in(node, ["bash", str(run_dir / f"node-{node}.sh")],
                                               env=env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True)
    endpoint = f"http://198.18.0.11:{BASE}"
    try:
        assert wait_until(lambda: _served(endpoint), timeout=90), \
            (run_dir / "node-n1.out").read_text()[-2000:]
        reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                           json={"model": "demo-model", "max_tokens": 8,
                                 "messages": [{"role": "user", "content": "w3 w4 w5"}]})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8
        for node in ("n2", "n3"):
            assert any("dynamo.mocker" in line
                       for line in _graph_processes(netns_cluster, node, run_dir))

        # n3's agent restarts its worker; the other nodes never notice.
        victim = _mocker_pid(netns_cluster, "n3")
        os.kill(victim, signal.SIGKILL)

        def healed() -> bool:
            try:
                state = json.loads((run_dir / "state-n3.json").read_text())
            except (OSError, ValueError):
                return False
            proc = state["processes"][0]
            return state["phase"] == "ready" and proc["restarts"] == 1 and proc["pid"] != victim
        assert wait_until(healed, timeout=30), (run_dir / "state-n3.json").read_text()
        assert all(scripts[node].poll() is None for node in NODES)
        assert wait_until(lambda: _served(endpoint), timeout=10)
    finally:
        for node in ("n3", "n2", "n1"):
            scripts[node].send_signal(signal.SIGTERM)
            scripts[node].wait(timeout=30)
    for node in NODES:
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n, run_dir),
                          timeout=15), (node, _graph_processes(netns_cluster, node, run_dir))


PREPARED = "it-hostsw"
PREPARED_BASE = 18970


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "dis-serve"), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home), "COLUMNS": "200"})


def _observed(home: Path) -> tuple[int, dict]:
    out = _cli(home, "status", PREPARED, "--json")
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else {}


def test_a_prepared_graph_started_on_three_nodes_is_watched_faulted_and_stopped_by_name(
        netns_cluster, tmp_path):
    home = tmp_path / "home"
    data = relocate(yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text()), PREPARED,
                    PREPARED_BASE)
    data["placement"] = {"hosts": {"nodes": [
        {"name": name, "address": f"198.18.0.1{k}"} for k, name in enumerate(NODES, 1)]}}
    topology = tmp_path / f"{PREPARED}.yaml"
    topology.write_text(yaml.safe_dump(data))
    prepared = _cli(home, "prepare", str(topology))
    assert prepared.returncode == 0, prepared.stdout + prepared.stderr
    run = home / "runs" / PREPARED
    assert f"2. on n1 (198.18.0.11): {run}/node-n1.sh (head" in prepared.stdout
    # The scripts find their run directory beside themselves; python3 is the venv's.
    env = os.environ | {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    scripts = {node: netns_cluster.popen_in(
        node, ["bash", str(run / f"node-{node}.sh")], env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True) for node in NODES}
    try:
        assert wait_until(lambda: _observed(home)[1].get("phase") == "ready", timeout=90), \
            _observed(home)
        code, observed = _observed(home)
        assert code == 0 and observed["router"] == "prefill 1/1, decode 2/2"
        assert {p["name"]: p["node"] for p in observed["processes"]} == {
            "etcd": "n1", "nats": "n1", "frontend": "n1", "prefill-0": "n1",
            "decode-0": "n2", "decode-1": "n3"}

        # A fault on a named node goes through the run directory to that node's agent.
        victim = _mocker_pid(netns_cluster, "n3")
        fault = _cli(home, "fault", PREPARED, "--node", "n3", "--process", "decode-1")
        assert fault.returncode == 0, fault.stdout + fault.stderr
        assert "[n3] its agent started: inflict --process decode-1 --action kill" \
            in fault.stdout
        assert wait_until(lambda: not psutil.pid_exists(victim)
                          or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE, 10)
        assert wait_until(lambda: next(p for p in _observed(home)[1].get("processes", [])
                                       if p["name"] == "decode-1")["restarts"] == 1
                          and _observed(home)[1]["phase"] == "ready", timeout=30)
    finally:
        down = _cli(home, "down", PREPARED)
        for node in NODES:
            try:
                scripts[node].wait(timeout=30)
            except subprocess.TimeoutExpired:
                scripts[node].send_signal(signal.SIGTERM)
                scripts[node].wait(timeout=30)
    assert down.returncode == 0, down.stdout + down.stderr
    assert down.stdout.startswith(f"stopped {PREPARED} (every node agent stopped its node")
    assert [scripts[node].returncode for node in NODES] == [0, 0, 0]
    for node in NODES:
        assert not _graph_processes(netns_cluster, node, run), node
    code, observed = _observed(home)
    assert code == 0 and observed["phase"] == "stopped"
