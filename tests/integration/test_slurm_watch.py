"""Watching a Slurm graph spread over three nodes from the client, as a local one is
watched: `status` (text and JSON) and `doctor` list every node's processes with their node
and the workers' registrations; `top --once` scrapes each node's frontend and workers at
their addresses and counts a bounded load on each; `logs` reads a process on another node;
and a whole node hung by `dis-serve fault --node` (SIGSTOP of its agent and its decode
worker, through an srun step of the job on that node) makes the graph degraded while the
other node's decode worker keeps serving, then ready again after SIGCONT. One graph for the
module: graphs/demo-3node-slurm.yaml on the multi-node test bed (tests/netns_cluster.py)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from chat_load import StreamingChats, stream_chat
from conftest import single_head_data, wait_until
from dis_serve.launch.rundir import RunDir
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
NAME = "it-3watch"
BASE = 18940
ENDPOINT = f"https://198.18.0.11:{BASE}"  # HTTPS off loopback, by default
NODES = {"etcd": "node0", "nats": "node0", "frontend": "node0", "balancer": "node0",
         "prefill-0": "node0", "decode-0": "node1", "decode-1": "node2"}
# The hung node is named once its agent's heartbeat is 6 s stale (allowed up to PAUSE_S - 4 s);
# the rest of the pause is node 1 serving alone. Every second more is a second of waiting.
PAUSE_S = 14
TOP_WINDOW_S, TOP_REQUESTS = 6.0, 5


def _cli(cluster, home: Path, *args: str, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=timeout,
                          env=cluster.env | {"DIS_SERVE_HOME": str(home), "COLUMNS": "200"},
                          check=False)


@pytest.fixture(scope="module")
def graph(netns_cluster, tmp_path_factory):
    """The 3-node graph, up and ready; (cluster, home, run). `down` at the end."""
    home = tmp_path_factory.mktemp("watch-home")
    data = relocate(single_head_data("demo-3node-slurm.yaml"), NAME, BASE)
    topology = home / f"{NAME}.yaml"
    topology.write_text(yaml.safe_dump(data))
    up = _cli(netns_cluster, home, "up", str(topology), "--detach", timeout=240)
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield netns_cluster, home, RunDir.for_graph(NAME, home)
    finally:
        down = _cli(netns_cluster, home, "down", NAME)
    assert down.returncode == 0, down.stdout + down.stderr


def _status(cluster, home: Path) -> tuple[int, dict]:
    out = _cli(cluster, home, "status", NAME, "--json")
    return out.returncode, json.loads(out.stdout)


def test_status_and_doctor_list_every_nodes_processes_and_the_registrations(graph):
    cluster, home, _run = graph
    code, observed = _status(cluster, home)
    assert code == 0 and observed["phase"] == "ready", observed
    assert {p["name"]: p["node"] for p in observed["processes"]} == NODES
    assert all(p["state"] == "ready" and p["pid"] for p in observed["processes"])
    assert observed["router"] == "prefill 1/1, decode 2/2"
    assert observed["endpoint"] == ENDPOINT

    text = _cli(cluster, home, "status", NAME)
    assert text.returncode == 0, text.stdout + text.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.stdout.splitlines() if line.count("│") > 6}
    assert {k: v for k, v in rows.items() if k in NODES} == NODES
    assert "router: prefill 1/1, decode 2/2" in text.stdout
    for address in ("198.18.0.11", "198.18.0.12", "198.18.0.13"):  # one worker each
        assert f"{address}:" in text.stdout, text.stdout

    doctor = _cli(cluster, home, "doctor", NAME, "--json", "--window", "1")
    assert doctor.returncode in (0, 1), doctor.stdout + doctor.stderr
    report = json.loads(doctor.stdout)
    # etcd in the scheme it speaks (the graph's TLS), as the run record lists it
    assert report["etcd"]["url"] == f"https://198.18.0.11:{BASE + 1}"
    workers = {(r["component"], r["address"].split(":")[0])
               for r in report["etcd"]["registrations"] if r.get("address")}
    assert workers == {("backend", "198.18.0.12"), ("backend", "198.18.0.13"),
                       ("prefill", "198.18.0.11")}, workers
    assert all(r["reachable"] for r in report["etcd"]["registrations"] if r.get("address"))


def test_logs_read_a_process_and_an_agent_on_another_node(graph):
    cluster, home, _run = graph
    worker = _cli(cluster, home, "logs", "decode-1", "--name", NAME, "-n", "5")
    assert worker.returncode == 0 and worker.stdout.strip(), worker.stdout + worker.stderr
    agent = _cli(cluster, home, "logs", "agent-node2", "--name", NAME, "-n", "50")
    assert agent.returncode == 0, agent.stderr
    assert "[node2] ready after" in agent.stdout, agent.stdout


def _top_once_around_requests(cluster, home: Path, run: RunDir) -> dict:
    """`top NAME --once --json`, with TOP_REQUESTS streamed chats sent once its first
    scrape is in (they end well inside the window)."""
    top = subprocess.Popen(
        [DIS_SERVE, "top", NAME, "--once", "--json", "--window", str(TOP_WINDOW_S)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=cluster.env | {"DIS_SERVE_HOME": str(home)})
    try:
        assert f"measuring {NAME}" in top.stderr.readline()
        ca = ssl.create_default_context(cafile=run.path / "tls" / "ca.pem")
        with httpx.Client(verify=ca, timeout=10) as client:
            outcomes = [stream_chat(client, ENDPOINT, "demo-model", 8)
                        for _ in range(TOP_REQUESTS)]
        assert all(o.ok for o in outcomes), [o.problem for o in outcomes]
        out, err = top.communicate(timeout=TOP_WINDOW_S + 30)
    finally:
        if top.poll() is None:
            top.kill()
            top.wait()
    assert top.returncode == 0, err
    return json.loads(out)


def test_top_once_scrapes_every_nodes_processes_at_their_addresses(graph):
    cluster, home, run = graph
    frame = _top_once_around_requests(cluster, home, run)
    rows = {p["name"]: p for p in frame["processes"]}
    assert {name: p["node"] for name, p in rows.items()} == {
        k: v for k, v in NODES.items() if k not in ("etcd", "nats", "balancer")}
    assert all(p["state"] == "ready" for p in rows.values()), rows
    assert all(p["requests_per_s"] is not None and p["active"] == 0 for p in rows.values())
    window = frame["window_s"]
    assert (frame["frontend"]["requests"], frame["frontend"]["errors"]) == (TOP_REQUESTS, 0)
    assert rows["frontend"]["requests_per_s"] * window == pytest.approx(TOP_REQUESTS)
    # Each request went through node0's prefill worker and one of the two decode nodes.
    assert rows["prefill-0"]["requests_per_s"] * window == pytest.approx(TOP_REQUESTS)
    decoded = rows["decode-0"]["requests_per_s"] + rows["decode-1"]["requests_per_s"]
    assert decoded * window == pytest.approx(TOP_REQUESTS)
    pools = {p["pool"]: p for p in frame["pools"]}
    assert (pools["decode"]["workers_ready"], pools["decode"]["workers_scraped"]) == (2, 2)
    assert frame["unreachable"] == [] and frame["node_problems"] == []

    text = _cli(cluster, home, "top", NAME, "--once", "--window", "1")
    assert text.returncode == 0, text.stdout + text.stderr
    drawn = {line.split()[0]: line.split()[1] for line in text.stdout.splitlines()
             if line.split() and line.split()[0] in rows}
    assert drawn == {name: p["node"] for name, p in rows.items()}, text.stdout


def _names_hung_node2(cluster, home) -> bool:
    code, observed = _status(cluster, home)
    return code == 3 and any(p.startswith("node node2: its agent")
                             for p in observed.get("problems", []))


def test_a_hung_node_degrades_the_graph_the_other_decode_worker_serves_then_it_is_ready(graph):
    cluster, home, run = graph
    before = json.loads((run.path / "state-node2.json").read_text())
    with StreamingChats(ENDPOINT, "demo-model", threads=4, timeout_s=5,
                        verify=ssl.create_default_context(cafile=run.path / "tls" / "ca.pem")
                        ) as load:
        assert wait_until(lambda: load.served_between(0, time.monotonic()) >= 8, timeout=30)
        fault = subprocess.Popen(
            [DIS_SERVE, "fault", NAME, "--node", "node2", "--action", "pause", "--duration",
             str(PAUSE_S)], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=cluster.env | {"DIS_SERVE_HOME": str(home)})
        paused_at = time.monotonic()
        try:
            # A worker that stops answering can degrade the graph before the agent's heartbeat
            # is 6 s stale; the hung node is named once it is.
            assert wait_until(lambda: _names_hung_node2(cluster, home), timeout=PAUSE_S - 4)
            code, observed = _status(cluster, home)
            assert code == 3 and observed["phase"] == "degraded", observed
            gone = {p["name"]: p["state"] for p in observed["processes"]}
            assert gone["decode-1"] == "gone" and gone["decode-0"] == "ready"
            degraded_at = time.monotonic()
            out, err = fault.communicate(timeout=PAUSE_S + 60)
        finally:
            if fault.poll() is None:
                fault.kill()
        resumed_at = time.monotonic()
        assert fault.returncode == 0, out + err
        assert "[node2] SIGSTOP agent" in out and "[node2] SIGSTOP decode-1" in out
        assert "[node2] SIGCONT agent" in out
        # Node 2 was stopped meanwhile: what completed was served by node 1's decode worker.
        served = load.served_between(degraded_at, resumed_at - 0.5)
        assert served >= 10, (served, load.failed_between(paused_at, resumed_at))
        assert wait_until(lambda: _status(cluster, home)[0] == 0
                          and _status(cluster, home)[1]["phase"] == "ready", timeout=30)
        recovered = time.monotonic()
        assert wait_until(lambda: load.served_between(recovered, time.monotonic()) >= 4,
                          timeout=15)
    state = json.loads((run.path / "state-node2.json").read_text())
    # The agent continued in place. Its worker did too, unless its etcd lease ran out while
    # it was stopped (a pause can outlast Dynamo's lease): then Dynamo's runtime exits on
    # waking ("Keep-alive lease expired") and the agent restarts it once.
    assert state["supervisor_pid"] == before["supervisor_pid"]
    worker = state["processes"][0]
    assert worker["restarts"] == 0 or (
        worker["restarts"] == 1 and "lease expired" in (run.path / "logs" / "decode-1.log")
        .read_text()), worker
