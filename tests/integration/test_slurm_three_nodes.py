"""`dis-serve up` of graphs/demo-3node-slurm.yaml on the multi-node test bed: three Slurm
nodes, each its own network namespace (tests/netns_cluster.py). etcd, NATS, the frontend and
the prefill worker run in node n1's namespace, one decode worker in each of n2's and n3's;
every process listens on its node's eth0 address; chat completions are served at the head
node's address. One graph for the whole sequence (bring-ups are the slow part): a decode
worker on node 2, then the frontend, then etcd, then node 1's agent SIGKILLed, each back
within 10 s with the job running; `down` has every agent stop its share in order, leaving
no process of the graph in any namespace and no data on the head's disk; a second `up`
starts clean."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import single_head_data, wait_until
from dis_serve.engines import engine_for
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.slurm.queue import read_job
from dis_serve.topology import Backend
from netns_cluster import NetnsCluster
from relocate import relocate

pytestmark = pytest.mark.integration
# The program a mocker worker runs as (its engine's module).
MOCKER_MODULE = engine_for(Backend.MOCKER).module
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE = 18700
HEAD = "198.18.0.11"


def _topology(tmp_path: Path, name: str) -> Path:
    data = relocate(single_head_data("demo-3node-slurm.yaml"), name, BASE)
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
    """Program (etcd, nats-server, dynamo.frontend, the mocker) -> addresses it listens on
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
        name = next((w for w in cmdline if w.startswith("dynamo.") or w == MOCKER_MODULE),
                    Path(cmdline[0]).name)
        found.setdefault(name, set()).add(address)
    return found


def _chat(endpoint: str, run: RunDir) -> int:
    """Completion tokens of one chat over HTTPS, checked against the graph's CA."""
    reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                       verify=ssl.create_default_context(cafile=run.path / "tls" / "ca.pem"),
                       json={"model": "demo-model", "max_tokens": 8,
                             "messages": [{"role": "user", "content": "w3 w4 w5"}]})
    return reply.json()["usage"]["completion_tokens"] if reply.status_code == 200 else 0


def _node_state(run: RunDir, node: str) -> dict:
    try:
        return json.loads((run.path / f"state-{node}.json").read_text())
    except (OSError, ValueError):
        return {}


def _worker_pid(cluster: NetnsCluster, node: str) -> int:
    for pid in cluster.processes_in(node):
        with contextlib.suppress(psutil.NoSuchProcess):
            if MOCKER_MODULE in psutil.Process(pid).cmdline():
                return pid
    raise AssertionError(f"no mocker in {node}")


def _job_state(cluster: NetnsCluster, job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=cluster.env,
                          capture_output=True, text=True, check=False).stdout.strip()


def _up(cluster: NetnsCluster, home: Path, topology: Path, name: str):
    up = _cli(cluster, home, "up", str(topology), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "ready in" in up.stdout and f"https://{HEAD}:{BASE}" in up.stdout
    run = RunDir.for_graph(name, home)
    # `up` prints how to curl it, with the graph's CA (the console may wrap the line anywhere)
    assert f"--cacert{run.path}/tls/ca.pem" in "".join(up.stdout.split()), up.stdout
    job = read_job(run)
    assert job is not None
    assert wait_until((run.path / "endpoint").is_file, timeout=30)
    return run, job


def _data_dir(name: str, job_id: str) -> Path:
    """Where the head's agent keeps etcd's and NATS's data (launch/node_data.py: each
    node's own, `@<node>`)."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    return (Path(os.environ.get("TMPDIR", "/tmp")) / f"dis-serve-{user}"
            / f"{name}-{job_id}@node0")


def _nothing_left(cluster: NetnsCluster, run: RunDir) -> None:
    for node in ("n1", "n2", "n3"):
        assert wait_until(lambda n=node: not _graph_processes(cluster, n, run.path),
                          timeout=15), (node, _graph_processes(cluster, node, run.path))


def _serves_at_the_head_with_every_process_on_its_node(cluster, home, run, endpoint) -> None:
    assert _chat(endpoint, run) == 8
    status = _cli(cluster, home, "status", "it-3node")
    assert "router: prefill 1/1, decode 2/2" in status.stdout, status.stdout
    assert _listening(cluster, "n1") == {
        "etcd": {HEAD}, "nats-server": {HEAD}, "dynamo.frontend": {HEAD}, "haproxy": {HEAD},
        MOCKER_MODULE: {HEAD}}
    assert _listening(cluster, "n2") == {MOCKER_MODULE: {"198.18.0.12"}}
    assert _listening(cluster, "n3") == {MOCKER_MODULE: {"198.18.0.13"}}


def _killed_and_back(cluster, run: RunDir, job_id: str, endpoint: str, node: str,
                     process: str, pid: int) -> None:
    """SIGKILL `pid` (`process` of `node`): within 10 s that node's agent has it running and
    ready again, and the graph serves; the job still runs."""
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()

    def back() -> bool:
        state = _node_state(run, node)
        proc = next((p for p in state.get("processes", []) if p["name"] == process), {})
        return (state.get("phase") == "ready" and proc.get("pid") not in (None, pid)
                and proc.get("state") == "ready")
    assert wait_until(back, timeout=10), (process, _node_state(run, node))
    assert wait_until(lambda: _chat(endpoint, run) == 8, timeout=10 - (time.monotonic() - killed))
    print(f"\n{process} on {node} SIGKILLed: back and serving after "
          f"{time.monotonic() - killed:.1f} s")
    assert _job_state(cluster, job_id) == "RUNNING"


def _agent_killed_and_back(cluster, run: RunDir, job_id: str, endpoint: str,
                           node: str) -> None:
    """SIGKILL the agent (its supervisor) of `node`: its keeper starts another, which starts
    the node's worker again, within 10 s; the job keeps running."""
    agent = _node_state(run, node)["supervisor_pid"]
    os.kill(agent, signal.SIGKILL)
    killed = time.monotonic()

    def back() -> bool:
        state = _node_state(run, node)
        return (state.get("supervisor_pid") not in (None, agent)
                and state.get("phase") == "ready")
    assert wait_until(back, timeout=10), _node_state(run, node)
    assert wait_until(lambda: _chat(endpoint, run) == 8, timeout=10 - (time.monotonic() - killed))
    print(f"\nagent of {node} SIGKILLed: back and serving after "
          f"{time.monotonic() - killed:.1f} s")
    assert _job_state(cluster, job_id) == "RUNNING"


def _pid_of(run: RunDir, node: str, process: str) -> int:
    return next(p["pid"] for p in _node_state(run, node)["processes"] if p["name"] == process)


def _stopped_in_order(run: RunDir) -> None:
    """Every agent stopped its share itself (not killed by Slurm): each state file says so."""
    for node in ("node0", "node1", "node2"):
        state = _node_state(run, node)
        assert state.get("phase") == "stopped", (node, state)
        assert all(p["state"] == "stopped" for p in state["processes"]), (node, state)


def test_a_three_node_graph_heals_every_kill_and_down_leaves_nothing_for_a_clean_second_up(
        netns_cluster, tmp_path):
    home = tmp_path / "home"
    topology = _topology(tmp_path, "it-3node")
    endpoint = f"https://{HEAD}:{BASE}"
    run, job = _up(netns_cluster, home, topology, "it-3node")
    data = _data_dir("it-3node", job.job_id)
    try:
        _serves_at_the_head_with_every_process_on_its_node(netns_cluster, home, run, endpoint)
        # etcd's and NATS's data: on the head node's own disk, private, not the run directory
        assert (data / "etcd-data").is_dir() and (data / "nats-data").is_dir()
        assert data.stat().st_mode & 0o777 == 0o700
        assert not (run.path / "etcd-data").exists()
        _killed_and_back(netns_cluster, run, job.job_id, endpoint, "node2", "decode-1",
                         _worker_pid(netns_cluster, "n3"))
        for process in ("frontend", "etcd"):
            _killed_and_back(netns_cluster, run, job.job_id, endpoint, "node0", process,
                             _pid_of(run, "node0", process))
        _agent_killed_and_back(netns_cluster, run, job.job_id, endpoint, "node1")
    finally:
        down = _cli(netns_cluster, home, "down", "it-3node")
    assert down.returncode == 0, down.stdout + down.stderr
    assert job.job_id not in netns_cluster.jobs()
    _nothing_left(netns_cluster, run)
    _stopped_in_order(run)
    assert not data.exists()

    run, again = _up(netns_cluster, home, topology, "it-3node")
    try:
        assert again.job_id != job.job_id
        assert _chat(endpoint, run) == 8
        states = [_node_state(run, node) for node in ("node0", "node1", "node2")]
        assert all(s["phase"] == "ready" for s in states), states
        assert all(p["restarts"] == 0 for s in states for p in s["processes"]), states
    finally:
        down = _cli(netns_cluster, home, "down", "it-3node")
    assert down.returncode == 0, down.stdout + down.stderr
    _nothing_left(netns_cluster, run)
    _stopped_in_order(run)
    assert not _data_dir("it-3node", again.job_id).exists()


def _scalable(tmp_path: Path, name: str) -> dict:
    """The 3-node graph with a spare GPU on every node (the job holds them: hardware) and
    room for two more decode workers."""
    data = relocate(single_head_data("demo-3node-slurm.yaml"), name, BASE)
    data["hardware"]["gpus_per_node"] = 2
    data["pools"]["decode"]["max_workers"] = 4
    return data


def _decode_on(run: RunDir) -> dict[str, str]:
    """Ready decode workers -> their node, as the agents' state files say."""
    found = {}
    for node in ("node0", "node1", "node2"):
        for proc in _node_state(run, node).get("processes", []):
            if proc["name"].startswith("decode-") and proc["state"] == "ready":
                found[proc["name"]] = node
    return found


@pytest.fixture(scope="module")
def scalable(netns_cluster, tmp_path_factory):
    """One graph of spare GPUs for the module's changes: (run, home, its topology mapping,
    where to write edits of it); down after, leaving nothing in any namespace."""
    tmp = tmp_path_factory.mktemp("3scale")
    home, data = tmp / "home", _scalable(tmp, "it-3scale")
    path = tmp / "it-3scale.yaml"
    path.write_text(yaml.safe_dump(data))
    run, _job = _up(netns_cluster, home, path, "it-3scale")
    try:
        yield run, home, data, tmp
    finally:
        stopped = _cli(netns_cluster, home, "down", "it-3scale")
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    _nothing_left(netns_cluster, run)


@contextlib.contextmanager
def _streaming(run: RunDir):
    """Four streaming chat clients at the head for the block; afterwards every request
    answered in full."""
    from chat_load import StreamingChats

    verify = ssl.create_default_context(cafile=run.path / "tls" / "ca.pem")
    with StreamingChats(f"https://{HEAD}:{BASE}", "demo-model", threads=4, max_tokens=48,
                        timeout_s=20, verify=verify) as load:
        yield
    outcomes = list(load.outcomes)
    assert outcomes and [o.problem for o in outcomes if not o.ok] == []
    assert all(o.tokens == load.max_tokens for o in outcomes if o.ok)


def test_scale_on_the_three_node_bed_adds_and_drains_workers_across_nodes_under_load(
        netns_cluster, scalable):
    run, home, _data, _tmp = scalable
    revision = run.read_cluster_plan().revision
    with _streaming(run):
        up = _cli(netns_cluster, home, "scale", "it-3scale", "decode=4")
        assert up.returncode == 0, up.stdout + up.stderr
        on = _decode_on(run)
        assert len(on) == 4 and len(set(on.values())) == 3, on  # every node holds one
        down = _cli(netns_cluster, home, "scale", "it-3scale", "decode=2")
        assert down.returncode == 0, down.stdout + down.stderr
        assert sorted(_decode_on(run)) == ["decode-0", "decode-1"]
    assert run.read_cluster_plan().revision == revision + 2


def test_apply_on_the_three_node_bed_rolls_the_decode_pools_engine_settings_under_load(
        netns_cluster, scalable):
    run, home, data, tmp = scalable
    before = sorted(_decode_on(run))
    edited = dict(data, pools=dict(data["pools"], decode=dict(
        data["pools"]["decode"], workers=len(before), max_batch_size=128)))
    path = tmp / "it-3scale-edited.yaml"
    path.write_text(yaml.safe_dump(edited))
    with _streaming(run):
        applied = _cli(netns_cluster, home, "apply", str(path))
        assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "pools.decode.max_batch_size changed" in applied.stdout, applied.stdout
    after = _decode_on(run)
    assert len(after) == len(before) and not set(after) & set(before), (before, after)
    plan = run.read_cluster_plan()
    for node in plan.nodes:
        for spec in node.processes:
            if spec.name in after:
                assert "128" in spec.argv, spec.argv
    assert run.read_topology().pools.decode.max_batch_size == 128
