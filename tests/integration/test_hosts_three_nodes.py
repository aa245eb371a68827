"""`render --target hosts` on the multi-node test bed: the demo-3node graph placed on three
named hosts (198.18.0.11-13), each node's generated script started inside its own network
namespace, as on three machines; each script hands over to its node's agent. Chat
completions are served at the head node's address; a worker killed on n3 is restarted by
n3's agent; SIGTERM to the scripts leaves no process of the graph in any namespace.

Then one graph `prepare`d and started by its node scripts, for the tests after in order:
watched by name, a fault on a named node, the head's frontend, etcd and NATS each SIGKILLed
and back within 10 s with a chat served, and `down` by name after the head's keeper was
SIGKILLed, which leaves no process and no etcd/NATS data behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from chat_load import stream_chat
from conftest import single_head_data, wait_until
from dis_serve.engines import engine_for
from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.launch.model_card import write_model_card
from dis_serve.launch.node_data import coordination_data_dir, lock_file
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.topology import Backend, Topology
from netns_cluster import NetnsCluster
from relocate import relocate

pytestmark = pytest.mark.integration
# The program a mocker worker runs as (its engine's module).
MOCKER_MODULE = engine_for(Backend.MOCKER).module
BASE = 18750
NODES = ("n1", "n2", "n3")


def _topology() -> Topology:
    data = relocate(single_head_data("demo-3node-slurm.yaml"),
                    "it-hosts3", BASE)
    data["placement"] = {"hosts": {"nodes": [
        {"name": name, "address": f"198.18.0.1{k}"} for k, name in enumerate(NODES, 1)]}}
    return Topology.model_validate(data)


def _served(url: str, ca: ssl.SSLContext) -> bool:
    try:
        ready = httpx.get(f"{url}/v1/models/demo-model/ready", timeout=2, trust_env=False,
                          verify=ca)
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
            if MOCKER_MODULE in psutil.Process(pid).cmdline():
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
    scripts = netns_cluster.start_hosts_scripts(run_dir, NODES, env)
    # HTTPS off loopback by default, the head's certificate signed by the graph's CA.
    endpoint = f"https://198.18.0.11:{BASE}"
    ca = ssl.create_default_context(cafile=run_dir / "tls" / "ca.pem")
    try:
        assert wait_until(lambda: _served(endpoint, ca), timeout=90), \
            (run_dir / "node-n1.out").read_text()[-2000:]
        reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                           verify=ca, json={"model": "demo-model", "max_tokens": 8,
                                            "messages": [{"role": "user", "content": "w3 w4 w5"}]})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8
        for node in ("n2", "n3"):
            assert any(MOCKER_MODULE in line
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
        assert wait_until(lambda: _served(endpoint, ca), timeout=10)
    finally:
        for node in ("n3", "n2", "n1"):
            scripts[node].send_signal(signal.SIGTERM)
            scripts[node].wait(timeout=30)
    for node in NODES:
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n, run_dir),
                          timeout=15), (node, _graph_processes(netns_cluster, node, run_dir))


PREPARED = "it-hostsw"
PREPARED_BASE = 18970
PREPARED_ENDPOINT = f"https://198.18.0.11:{PREPARED_BASE}"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).parent / "dis-serve"), *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home), "COLUMNS": "200"})


def _observed(home: Path) -> tuple[int, dict]:
    out = _cli(home, "status", PREPARED, "--json")
    return out.returncode, json.loads(out.stdout) if out.stdout.strip() else {}


@dataclass
class PreparedGraph:
    """The graph `prepare` wrote, its node scripts running in the namespaces; shared by the
    tests below in order (a bring-up is the slow part), stopped by the last."""

    home: Path
    run: Path
    scripts: dict[str, subprocess.Popen]
    ca: ssl.SSLContext
    down: subprocess.CompletedProcess[str] | None = None

    def node_state(self, node: str) -> dict:
        try:
            return json.loads((self.run / f"state-{node}.json").read_text())
        except (OSError, ValueError):
            return {}

    def chat_served(self) -> bool:
        with httpx.Client(timeout=5, trust_env=False, verify=self.ca) as client:
            outcome = stream_chat(client, PREPARED_ENDPOINT, "demo-model", max_tokens=8)
        return outcome.ok and outcome.tokens == 8

    def stop(self) -> None:
        if self.down is None:
            self.down = _cli(self.home, "down", PREPARED)
        for script in self.scripts.values():
            try:
                script.wait(timeout=30)
            except subprocess.TimeoutExpired:
                script.send_signal(signal.SIGTERM)
                script.wait(timeout=30)


@pytest.fixture(scope="module")
def prepared(netns_cluster, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("hosts-prepared")
    home = tmp_path / "home"
    data = relocate(single_head_data("demo-3node-slurm.yaml"), PREPARED,
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
    graph = PreparedGraph(home, run, scripts,
                          ssl.create_default_context(cafile=run / "tls" / "ca.pem"))
    try:
        assert wait_until(lambda: _observed(home)[1].get("phase") == "ready", timeout=90), \
            _observed(home)
        yield graph
    finally:
        graph.stop()
        # What a test that failed half-way left: the head's supervisor without its keeper.
        for pid in netns_cluster.processes_in("n1"):
            with contextlib.suppress(psutil.NoSuchProcess):
                if str(run) in " ".join(psutil.Process(pid).cmdline()):
                    psutil.Process(pid).kill()


def test_a_prepared_graph_started_on_three_nodes_is_watched_by_name(prepared):
    code, observed = _observed(prepared.home)
    assert code == 0 and observed["router"] == "prefill 1/1, decode 2/2"
    assert {p["name"]: p["node"] for p in observed["processes"]} == {
        "etcd": "n1", "nats": "n1", "frontend": "n1", "balancer": "n1", "prefill-0": "n1",
        "decode-0": "n2", "decode-1": "n3"}


def test_a_fault_on_a_named_node_goes_through_the_run_directory_to_its_agent(
        prepared, netns_cluster):
    victim = _mocker_pid(netns_cluster, "n3")
    fault = _cli(prepared.home, "fault", PREPARED, "--node", "n3", "--process", "decode-1")
    assert fault.returncode == 0, fault.stdout + fault.stderr
    assert "[n3] its agent started: inflict --process decode-1 --action kill" \
        in fault.stdout
    assert wait_until(lambda: not psutil.pid_exists(victim)
                      or psutil.Process(victim).status() == psutil.STATUS_ZOMBIE, 10)
    assert wait_until(lambda: next(p for p in _observed(prepared.home)[1].get("processes", [])
                                   if p["name"] == "decode-1")["restarts"] == 1
                      and _observed(prepared.home)[1]["phase"] == "ready", timeout=30)


@pytest.mark.parametrize("process", ["frontend", "balancer", "etcd", "nats"])
def test_a_sigkilled_head_process_is_back_within_10_s_with_a_chat_served(prepared, process):
    """The head's agent restarts it; a streamed chat is served again within 10 s of the
    kill (a frontend's restart fails the requests sent meanwhile, so it is retried)."""
    state = prepared.node_state("n1")
    victim = next(p["pid"] for p in state["processes"] if p["name"] == process)
    os.kill(victim, signal.SIGKILL)
    killed = time.monotonic()

    def back() -> bool:
        now = prepared.node_state("n1")
        proc = next((p for p in now.get("processes", []) if p["name"] == process), {})
        return (now.get("phase") == "ready" and proc.get("pid") not in (None, victim)
                and proc.get("state") == "ready")
    assert wait_until(back, timeout=10), (process, prepared.node_state("n1"))
    assert wait_until(prepared.chat_served, timeout=10 - (time.monotonic() - killed))
    print(f"\n{process} on n1 SIGKILLed: back and serving after "
          f"{time.monotonic() - killed:.1f} s")
    assert all(script.poll() is None for script in prepared.scripts.values())


def test_down_by_name_stops_every_node_and_clears_the_heads_data_even_without_its_keeper(
        prepared, netns_cluster):
    """The head's keeper SIGKILLed (its node script `exec`s the agent): the supervisor
    serves on without it, and on `down` stops its node and removes etcd's and NATS's data
    itself, which its keeper would have."""
    data_dir = coordination_data_dir(Topology.model_validate_json(
        (prepared.run / "topology.json").read_text()), os.environ, node=NODES[0])
    assert data_dir.is_dir() and lock_file(data_dir).is_file()
    keeper = prepared.scripts["n1"]
    assert "agent" in psutil.Process(keeper.pid).cmdline()  # what the script exec'd
    keeper.kill()
    keeper.wait()
    assert prepared.chat_served()
    prepared.stop()
    assert prepared.down.returncode == 0, prepared.down.stdout + prepared.down.stderr
    assert prepared.down.stdout.startswith(
        f"stopped {PREPARED} (every node agent stopped its node")
    assert "removed" not in prepared.down.stdout  # the supervisor had removed it already
    assert [prepared.scripts[node].returncode for node in NODES] == [-signal.SIGKILL, 0, 0]
    for node in NODES:
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n, prepared.run),
                          timeout=15), (node, _graph_processes(netns_cluster, node,
                                                               prepared.run))
    assert not data_dir.exists() and not lock_file(data_dir).exists()
    code, observed = _observed(prepared.home)
    assert code == 0 and observed["phase"] == "stopped"
