"""Lose any one node, the head included, and keep serving: the 3-node Slurm graph on the test
bed with its defaults for several nodes (two frontend replicas, each behind a balancer on its
node, etcd and NATS members on all three) and a floating address clients use (keepalived's
VRRP between the two frontend nodes), under a bounded streaming load through that address.
In order, on one graph:
- a frontend SIGKILLed on the healthy graph fails no request that had not started;
- the whole head node frozen 20 s (SIGSTOP of every process in its namespace, its agent and
  slurmd included): new requests succeed through the address within 5 s; `status` from this
  machine says degraded and names the head; after SIGCONT the graph is ready again, its
  processes back (etcd member, NATS routes, frontend behind the address), and it serves on
  for WOKEN_S after waking with every agent's step still running;
- the head node lost (every process frozen, then SIGKILLed children before parents:
  nothing of it answers or says goodbye; `crash` in tests/netns_cluster.py says why the
  order): the same targets, Slurm removes the node from the job and the job runs on
  (--no-kill, no requeue), and `down` ends promptly, exit 0, leaving no process and no data
  directory on this machine.
Every figure is printed (`-s` shows them) for docs/multi-node.md and docs/chaos.md."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from chat_load import StreamingChats
from conftest import GRAPHS, require_netns, wait_until
from dis_serve.launch.rundir import RunDir
from dis_serve.render.run_layout import TOPOLOGY_FILE
from dis_serve.security.pki_files import TLS_DIR, nats_token_path, pki_paths
from dis_serve.topology import Topology
from netns_cluster import NetnsCluster, crash, leftovers
from plane_probes import (
    ACCEPTED,
    etcd_http_attempt,
    frontend_attempt,
    nats_attempt,
    nats_clear_text_attempt,
    no_verify,
    plain_tcp_attempt,
    request_port_attempt,
    tcp_reachable,
    with_client_cert,
)
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
NAME = "it-headloss"
BASE = 19020
FLOATING = "198.18.0.100"  # free on the bed: the bridge is .1, nodes .1K, the attacker .200
ENDPOINT = f"https://{FLOATING}:{BASE}"
HEAD, HEAD_NS_NODE = "node0", "n1"
PAUSE_S = 20
# How long new requests may fail after a loss (the target); a fault is judged once
# this many requests sent after that time have streamed every token (or WATCH_S has passed).
SETTLE_S, SERVED_AFTER, WATCH_S = 5.0, 6, 30.0
# Slurm marks a node DOWN after this much silence: longer than the pause (a head frozen
# past it is dropped from the --no-kill job), far shorter than Slurm's default 300 s so the
# test sees the lost node taken out of the job.
SLURMD_TIMEOUT_S = 30
# Set on the running bed once the pause is over, before the head is lost (test-only knobs:
# what Slurm does is unchanged, only sooner). slurmctld marks a node DOWN after two failed
# pings, each waiting out MessageTimeout (default 10 s) on a node that does not answer, and
# only past SlurmdTimeout: measured on the bed (slurmd SIGKILLed), 28 s at the defaults and
# SlurmdTimeout 10, 15-19 s at SlurmdTimeout 10 with MessageTimeout 3.
LOST_SETTINGS = {"SlurmdTimeout": 10, "MessageTimeout": 3}
# How long after SIGCONT the graph is watched serving, ready, every agent's step running.
WOKEN_S = 15.0


def _cli(cluster, home: Path, *args: str, timeout: float = 120
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=timeout,
                          env=cluster.env | {"DIS_SERVE_HOME": str(home), "COLUMNS": "220"},
                          check=False)


def _topology(home: Path) -> Path:
    """demo-3node-slurm with a prefill and a decode worker on two nodes each (so that no
    node's loss takes a whole pool) and the floating address."""
    data = relocate(yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text()), NAME,
                    BASE)
    data["hardware"]["gpus_per_node"] = 2
    data["pools"]["prefill"] |= {"workers": 2, "gpu_ids": [[0], [2]]}
    data["pools"]["decode"] |= {"workers": 2, "gpu_ids": [[3], [4]]}
    data["frontend"] |= {"floating_address": {"address": FLOATING}}
    path = home / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def bed(tmp_path_factory):
    """The 3-node bed with slurmd marked DOWN after SLURMD_TIMEOUT_S of silence (not 300;
    LOST_SETTINGS once the pause is over), so the test sees Slurm take the lost node out of
    the job."""
    require_netns()
    cluster = NetnsCluster.start(tmp_path_factory.mktemp("netns-headloss"), nodes=3,
                                 attacker=False, slurmd_timeout_s=SLURMD_TIMEOUT_S)
    try:
        yield cluster
    finally:
        cluster.stop()
    assert leftovers(cluster.tag) == []


@pytest.fixture(scope="module")
def graph(bed, tmp_path_factory):
    """The graph, up and ready; (cluster, home, run, ca). `down` at the end if a test has
    not stopped it."""
    home = tmp_path_factory.mktemp("headloss-home")
    yield from _up(bed, home)


def _up(bed, home: Path):
    up = _cli(bed, home, "up", str(_topology(home)), "--detach", timeout=240)
    assert up.returncode == 0, up.stdout + up.stderr
    run = RunDir.for_graph(NAME, home)
    ca = ssl.create_default_context(cafile=run.path / "tls" / "ca.pem")
    try:
        yield bed, home, run, ca
    finally:
        _cli(bed, home, "down", NAME)


def _status(cluster, home: Path) -> tuple[int, dict]:
    out = _cli(cluster, home, "status", NAME, "--json")
    try:
        return out.returncode, json.loads(out.stdout)
    except ValueError:
        return out.returncode, {"stdout": out.stdout, "stderr": out.stderr}


def _names_lost_head(cluster, home: Path) -> bool:
    """`status` says degraded and names the head node (its agent silent 6 s, or dead): not
    merely degraded, which a router that does not answer at once also makes it."""
    code, observed = _status(cluster, home)
    return code == 3 and any(p.startswith(f"node {HEAD}:")
                             for p in observed.get("problems", []))


def _ready(cluster, home: Path) -> bool:
    code, observed = _status(cluster, home)
    return code == 0 and observed.get("phase") == "ready"


def _holder(run: RunDir) -> str | None:
    """The node that holds the floating address, as its agent published it."""
    for path in sorted(run.path.glob("vrrp-*.json")):
        try:
            if json.loads(path.read_text()).get("holds"):
                return path.stem.removeprefix("vrrp-")
        except (OSError, ValueError):
            continue
    return None


def _judge(load: StreamingChats, fault_at: float, what: str,
           holder: str | None = None) -> dict:
    """What the load saw from `fault_at` on: in-flight streams cut, new requests failed,
    and failed after the settling time, with the last failure's start."""
    outcomes = list(load.outcomes)
    in_flight = [o for o in outcomes if o.started < fault_at < o.ended]
    new = [o for o in outcomes if o.started >= fault_at]
    failed = [o for o in new if not o.ok]
    figures = {
        "fault": what, "address_held_by": holder, "in_flight": len(in_flight),
        "in_flight_failed": sum(not o.ok for o in in_flight),
        "new": len(new), "new_failed": len(failed),
        "new_failed_after_settle": sum(o.started >= fault_at + SETTLE_S for o in failed),
        "last_failure_started_s": round(max((o.started - fault_at for o in failed),
                                            default=0.0), 2),
        "first_success_s": round(min((o.ended - fault_at for o in new if o.ok),
                                     default=float("nan")), 2),
        "problems": sorted({o.problem for o in failed} | {o.problem for o in in_flight
                                                          if not o.ok}, key=str)}
    print(f"\nFIGURES {json.dumps(figures)}")
    return figures


def _served_after_settling(load: StreamingChats, fault_at: float) -> bool:
    """Poll until requests sent after the settling time have been served (no fixed window:
    the figures cover the fault up to then)."""
    return wait_until(lambda: load.served_between(fault_at + SETTLE_S, time.monotonic())
                      >= SERVED_AFTER, timeout=WATCH_S)


def _state_pid(run: RunDir, node: str, process: str) -> int:
    state = json.loads((run.path / f"state-{node}.json").read_text())
    return next(p["pid"] for p in state["processes"] if p["name"] == process)


def _nats(url: str, context: ssl.SSLContext) -> str:
    return asyncio.run(nats_attempt(url, context))


def test_every_member_route_replica_and_balancer_asks_for_the_graphs_files(graph):
    """From this machine, with none of the graph's files: every etcd member's client and
    peer port, every NATS member's client and route port, every frontend replica and
    balancer refuses what lacks the graph's CA, client certificate or token, while each
    member takes the graph's own client (so no refusal is routing or a port not there)."""
    cluster, _home, run, _ca = graph
    topo = Topology.model_validate_json((run.path / TOPOLOGY_FILE).read_text())
    etcd, nats = topo.coordination.etcd, topo.coordination.nats
    nodes = [cluster.address(n) for n in ("n1", "n2", "n3")]
    tls = pki_paths(run.path / TLS_DIR)
    ours = with_client_cert(tls.ca_cert, tls.client_cert, tls.client_key)
    token = Path(nats_token_path(run.path / TLS_DIR)).read_text().strip()
    everything = {"key": base64.b64encode(b"v1/").decode(),
                  "range_end": base64.b64encode(b"v10").decode()}
    attempts: dict[str, Callable[[], str]] = {}
    for host in nodes:
        client, peer = f"{host}:{etcd.client_port}", f"{host}:{etcd.peer_port}"
        route, member = f"{host}:{nats.cluster_port}", f"{host}:{nats.port}"
        assert all(tcp_reachable(a) for a in (client, peer, route, member)), host
        attempts |= {
            f"etcd {client} range, TLS without client certificate":
                partial(etcd_http_attempt, f"https://{client}/v3/kv/range", everything),
            f"etcd {client} range, plain HTTP":
                partial(etcd_http_attempt, f"http://{client}/v3/kv/range", everything),
            f"etcd peer {peer}, TLS without client certificate":
                partial(request_port_attempt, peer, no_verify()),
            f"etcd peer {peer}, clear text": partial(plain_tcp_attempt, peer),
            f"NATS {member}, TLS, no certificate, no token":
                partial(_nats, f"tls://{member}", no_verify()),
            f"NATS {member}, the graph's certificate, no token":
                partial(_nats, f"tls://{member}", ours),
            f"NATS {member}, clear text": partial(nats_clear_text_attempt, member),
            f"NATS route {route}, TLS without client certificate":
                partial(_nats, f"tls://{route}", no_verify()),
            f"NATS route {route}, clear text": partial(nats_clear_text_attempt, route)}
        with httpx.Client(verify=ours, trust_env=False, timeout=5) as graphs_own:
            assert graphs_own.post(f"https://{client}/v3/kv/range",
                                   json=everything).status_code == 200, client
        assert asyncio.run(nats_attempt(f"tls://{member}", ours, token, ">")) == ACCEPTED
    for host, i in zip(nodes, range(topo.frontend_replicas), strict=False):
        replica = f"{host}:{topo.frontend.replica_port + i}"
        attempts |= {
            f"frontend replica {replica}, plain HTTP": partial(frontend_attempt,
                                                               f"http://{replica}"),
            f"balancer {host}:{topo.frontend.port}, plain HTTP":
                partial(frontend_attempt, f"http://{host}:{topo.frontend.port}")}
    attempts[f"floating address {FLOATING}, plain HTTP"] = partial(
        frontend_attempt, f"http://{FLOATING}:{BASE}")
    # All at once: each refusal may wait out a client's own timeout.
    with ThreadPoolExecutor(max_workers=len(attempts)) as pool:
        rows = list(zip(attempts, pool.map(lambda attempt: attempt(), attempts.values()),
                        strict=True))
    print("\n" + "\n".join(f"{what}: {result}" for what, result in rows))
    assert not [row for row in rows if row[1] == ACCEPTED], rows


def test_a_frontend_killed_on_a_healthy_graph_fails_no_request_that_had_not_started(graph):
    cluster, home, run, ca = graph
    assert _ready(cluster, home)
    with StreamingChats(ENDPOINT, "demo-model", threads=3, max_tokens=24, timeout_s=6,
                        verify=ca) as load:
        assert wait_until(lambda: load.served_between(0, time.monotonic()) >= 6, timeout=30)
        holder = _holder(run)
        killed_at = time.monotonic()
        os.killpg(_state_pid(run, HEAD, "frontend-0"), signal.SIGKILL)
        _served_after_settling(load, killed_at)
        figures = _judge(load, killed_at, "SIGKILL frontend-0", holder)
    assert figures["new_failed"] == 0, figures
    assert wait_until(lambda: _ready(cluster, home), timeout=30)


def test_a_frozen_head_node_degrades_the_graph_which_serves_on_and_is_ready_after(graph):
    cluster, home, run, ca = graph
    with StreamingChats(ENDPOINT, "demo-model", threads=3, max_tokens=24, timeout_s=6,
                        verify=ca) as load:
        assert wait_until(lambda: load.served_between(0, time.monotonic()) >= 6, timeout=30)
        holder = _holder(run)
        paused_at = time.monotonic()
        cluster.signal_node(HEAD_NS_NODE, signal.SIGSTOP)
        try:
            assert wait_until(lambda: _names_lost_head(cluster, home), timeout=PAUSE_S - 4), \
                _diagnosis(cluster, home, run)
            _code, observed = _status(cluster, home)
            text = _cli(cluster, home, "status", NAME)
            print(f"\nSTATUS during the pause (exit {text.returncode}):\n{text.stdout}")
            time.sleep(max(0.0, paused_at + PAUSE_S - time.monotonic()))
        finally:
            cluster.signal_node(HEAD_NS_NODE, signal.SIGCONT)
        resumed_at = time.monotonic()
        figures = _judge(load, paused_at, f"SIGSTOP node {HEAD} {PAUSE_S} s", holder)
        assert wait_until(lambda: _ready(cluster, home), timeout=60), \
            _diagnosis(cluster, home, run)
        ready_at = time.monotonic()
        back = round(ready_at - resumed_at, 2)
        print(f"\nFIGURES {json.dumps({'ready_after_sigcont_s': back, 'holder': _holder(run)})}")
        # The watch window: until WOKEN_S after SIGCONT, and at least until SERVED_AFTER
        # requests sent once it was ready again were served (in CI it was ready only after
        # 20 s, its head's frontend restarted for the lease it lost, past the whole window).
        time.sleep(max(0.0, resumed_at + WOKEN_S - time.monotonic()))
        assert wait_until(lambda: load.served_between(ready_at, time.monotonic())
                          >= SERVED_AFTER, timeout=WATCH_S), _diagnosis(cluster, home, run)
        woken = _judge(load, ready_at, f"ready again, to {WOKEN_S} s after SIGCONT or later")
        # A head frozen past the etcd lease of its frontend finds that lease gone once it
        # runs again, and Dynamo shuts the frontend down (exit 0) on its own, possibly after
        # the graph was ready: the supervisor restarts it (seen in CI, at this very check).
        # The load above judged what clients saw meanwhile; here the graph must come back.
        assert wait_until(lambda: _ready(cluster, home), timeout=45), \
            _diagnosis(cluster, home, run)
    assert observed["phase"] == "degraded", observed
    assert any(problem.startswith(f"node {HEAD}:") for problem in observed["problems"])
    assert {p["node"] for p in observed["processes"] if p["state"] == "gone"} == {HEAD}
    assert HEAD in text.stdout and "its agent" in text.stdout
    assert figures["new_failed_after_settle"] == 0, figures
    assert woken["new"] >= SERVED_AFTER and woken["new_failed"] == 0, woken


def test_a_lost_head_node_leaves_a_degraded_graph_serving_through_the_address(graph):
    cluster, home, run, ca = graph
    cluster.reconfigure(**LOST_SETTINGS)  # no pause follows
    with StreamingChats(ENDPOINT, "demo-model", threads=3, max_tokens=24, timeout_s=6,
                        verify=ca) as load:
        assert wait_until(lambda: load.served_between(0, time.monotonic()) >= 6, timeout=30)
        names = {_name(pid) for pid in cluster.processes_in(HEAD_NS_NODE)}
        holder = _holder(run)
        lost_at = time.monotonic()
        crash(cluster.processes_in(HEAD_NS_NODE))
        assert {"slurmd", "keepalived", "haproxy", "etcd"} <= names, names
        _served_after_settling(load, lost_at)
        figures = _judge(load, lost_at, f"SIGKILL node {HEAD}", holder)
        assert wait_until(lambda: _names_lost_head(cluster, home), timeout=20), \
            _diagnosis(cluster, home, run)
        _code, observed = _status(cluster, home)
        text = _cli(cluster, home, "status", NAME)
        print(f"\nSTATUS after the loss (exit {text.returncode}):\n{text.stdout}")
        # Slurm marks the silent node DOWN and keeps the job on the other two (--no-kill).
        assert wait_until(lambda: _node_state(cluster, "n1").startswith("down"),
                          timeout=SLURMD_TIMEOUT_S * 3)
        assert _job_state(cluster, home) == "RUNNING"
        still = _judge(load, time.monotonic() - 3, "serving after Slurm removed the node")
    assert figures["new_failed_after_settle"] == 0, figures
    assert still["new_failed"] == 0, still
    assert observed["phase"] == "degraded", observed
    assert any(problem.startswith(f"node {HEAD}:") for problem in observed["problems"])
    assert HEAD in text.stdout


def test_down_after_the_loss_ends_promptly_and_leaves_nothing_behind(graph):
    cluster, home, _run, _ca = graph
    started = time.monotonic()
    down = _cli(cluster, home, "down", NAME, timeout=120)
    took = time.monotonic() - started
    print(f"\nFIGURES {json.dumps({'down_s': round(took, 2), 'exit': down.returncode})}")
    print(down.stdout)
    for node in ("node1", "node2"):
        log = _run.logs / f"agent-{node}.log"
        if log.exists():
            print(f"--- {log.name}\n" + "\n".join(log.read_text().splitlines()[-12:]))
    assert down.returncode == 0, down.stdout + down.stderr
    assert took < 30, down.stdout
    for node in ("n2", "n3"):
        assert wait_until(lambda n=node: _graph_processes(cluster, n) == [], timeout=20), \
            _graph_processes(cluster, node)
    data = Path(os.environ.get("TMPDIR", "/tmp")) / f"dis-serve-{psutil.Process().username()}"
    assert not [p for p in data.glob(f"{NAME}*")], list(data.glob(f"{NAME}*"))


def _diagnosis(cluster, home: Path, run: RunDir) -> str:
    """What to read when a step fails: status, the addresses each node holds, the job, and
    the last lines of the floating address's, the balancers' and the agents' logs."""
    parts = [_cli(cluster, home, "status", NAME).stdout]
    for node in ("n1", "n2", "n3"):
        parts.append(f"{node}: " + cluster.run_in(node, "ip", "-4", "-o", "addr").stdout)
    parts.append(subprocess.run(["squeue", "-h", "-o", "%i %T %N %r"], env=cluster.env,
                                capture_output=True, text=True, check=False).stdout)
    for log in sorted(run.logs.glob("*.log")):
        if log.stem.startswith(("vrrp", "balancer", "agent", "slurm")):
            parts.append(f"--- {log.name}\n" + "\n".join(
                log.read_text(errors="replace").splitlines()[-15:]))
    return "\n".join(parts)


def _name(pid: int) -> str | None:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return None


def _graph_processes(cluster, node: str) -> list[str]:
    found = []
    for pid in cluster.processes_in(node):
        name = _name(pid)
        if name not in (None, "slurmd", "slurmstepd"):
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    found.append(name)
            except psutil.Error:
                continue
    return found


def _node_state(cluster, node: str) -> str:
    out = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], env=cluster.env,
                         capture_output=True, text=True, check=False)
    return out.stdout.strip().lower()


def _job_state(cluster, home: Path) -> str:
    job = RunDir.for_graph(NAME, home).read_record().job_id
    out = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], env=cluster.env,
                         capture_output=True, text=True, check=False)
    return out.stdout.strip()
