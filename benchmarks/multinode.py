"""Multi-node: bring-up and recovery of graphs/demo-3node-slurm.yaml on Slurm, on hosts and
on one host (local `up`), side by side in one run, on the network-namespace test bed.

The bed is tests/netns_cluster.py's: three namespaces on a bridge, 198.18.0.11-13, one slurmd
in each. The same graph (two prefill and two decode workers, none of a pool's two on one
node; two frontend replicas, each behind its node's balancer; on several nodes etcd members
on all three, a NATS member on each and the floating address 198.18.0.100 that clients use;
the same `security.tls.mode` in every arm, auto by default, so the arms differ only in
placement) runs three ways:

- local: the graph without its placement, `dis-serve up FILE --detach` on loopback;
- slurm: `dis-serve up FILE --detach` with `placement.slurm.interface: eth0` (sbatch, one
  agent per node as an srun step);
- hosts: `render --target hosts` once, then per run a fresh copy of the run directory and
  each `node-<name>.sh` started inside its node's namespace, as on three machines.

Bring-up: from the command's start until ready (`up` returning; for hosts the head agent's
`endpoint` file, written once the router sees every worker), and until a first chat
completion. Recovery: under a bounded load of streaming chats (2 clients, each starting one
every 0.2 s: 10 requests/s; every stream checked: HTTP 200, `[DONE]`, the token count asked
for), one process gets SIGKILL;
"ready again" is the node's state file showing that process restarted and ready and every
node's phase `ready`; "outage" is from the kill to the end of the last failed request;
failed requests are those that ended between the kill and 1 s after ready again. Every
repetition kills the decode worker decode-1 (on the third node); the first `--fault-reps`
repetitions (all, by default) also kill the frontend, etcd and NATS, one after the other
(the head node's replica or member where there are several), and then, on Slurm and hosts,
lose the head node: every process in its namespace (its agent, and on Slurm its slurmd)
frozen and SIGKILLed. That row has the new requests that failed, the first success after
the loss, the streams in flight that were cut and how long `status` took to name the node;
then the node comes back: on hosts its script started again (seconds until every node is
ready), on Slurm its slurmd started again (what Slurm then does with the job, and whether
the graph still serves, is recorded). The bed's slurmctld marks a silent node DOWN after
10 s (SlurmdTimeout, 300 s by default).
The arms interleave in a rotating order. Medians, ratios to local (target: recovery on Slurm
and hosts within 1.2x of local, issue 18) and every figure go to
benchmarks/results/multinode.json.

Needs root (namespaces, slurmd); skips with the reason otherwise. Takes
/tmp/ds-integration.lock for the whole run (it uses the bed and fixed ports), and removes
what it started (graphs, agents, daemons by pid, namespaces, veths, bridge), also on failure.

    python benchmarks/multinode.py [--reps 3] [--fault-reps 3] [--tls auto|off]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import yaml

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"
sys.path.insert(0, str(REPO / "tests"))  # the test bed: tests/netns_cluster.py
from chat_load import ClientThreads  # noqa: E402  (found through the line above)
from chat_load import stream_chat as one_chat  # noqa: E402

DIS_SERVE = str(Path(sys.executable).with_name("dis-serve"))
LOCK = Path("/tmp/ds-integration.lock")
GRAPH = REPO / "graphs" / "demo-3node-slurm.yaml"
ARMS = ("local", "slurm", "hosts")
BASES = {"local": 28700, "slurm": 28730, "hosts": 28760}
HEAD = "198.18.0.11"
HOSTS = {"n1": HEAD, "n2": "198.18.0.12", "n3": "198.18.0.13"}
MODEL = "demo-model"
MAX_TOKENS = 16
WORKER = "decode-1"  # a decode worker off the head node in both multi-node arms
# The process each fault kills, by its name on one machine; a multi-node arm kills the one
# of its replicas or members on the head node (`frontend-0`, `etcd-0`, `nats-0`).
FAULTS = {"worker SIGKILL": WORKER, "frontend SIGKILL": "frontend",
          "etcd SIGKILL": "etcd", "NATS SIGKILL": "nats", "head node loss": ""}
# Every process of the head node, its agent and slurmd included, frozen and then SIGKILLed
# (a node that crashed: nothing of it answers or says goodbye). Slurm and hosts only.
HEAD_LOSS = "head node loss"
HEAD_NODE = "n1"
SLURMD_TIMEOUT_S = 10  # the bed's slurmctld marks a silent node DOWN after this (not 300)
FLOATING = "198.18.0.100"
READY_TIMEOUT_S = 120.0
RECOVERY_TIMEOUT_S = 30.0
SETTLE_S = 1.0
TARGET_RATIO = 1.2  # issue 18: recovery on Slurm and hosts within 1.2x of local


def graph_data(arm: str, tls: str) -> dict:
    """The 3-node demo graph on the arm's ports; local without a placement, hosts on the
    bed's addresses. `tls` off: every plane in clear (multi-node arms then must say
    `insecure_network`); auto: the default, mutual TLS on every plane."""
    from relocate import relocate

    data = relocate(yaml.safe_load(GRAPH.read_text()), f"bench-mn-{arm}", BASES[arm])
    # A prefill and a decode worker on two nodes each, so no node's loss takes a whole pool;
    # two frontend replicas everywhere (the multi-node default; asked for on one machine).
    data["hardware"]["gpus_per_node"] = 2
    data["pools"]["prefill"] |= {"workers": 2, "gpu_ids": [[0], [2]]}
    data["pools"]["decode"] |= {"workers": 2, "gpu_ids": [[3], [4]]}
    data["frontend"] |= {"replicas": 2}
    if arm != "local":
        data["frontend"]["floating_address"] = {"address": FLOATING}
    if tls == "off":
        data["security"] = {"tls": {"mode": "off"}, "insecure_network": arm != "local"}
    if arm == "local":
        data.pop("placement")
    elif arm == "hosts":
        data["placement"] = {"hosts": {"nodes": [
            {"name": name, "address": address} for name, address in HOSTS.items()]}}
    return data


# ---------------------------------------------------------------- the three arms


@dataclass
class Arm:
    """One placement of the graph: start it (seconds to ready), stop it, read its state."""

    name: str
    work: Path
    env: dict[str, str]
    tls: str = "auto"
    cluster: object = None  # the bed (NetnsCluster), on the multi-node arms

    def bring_back(self, node: str) -> float | None:
        """A lost node back in the graph; seconds until every node is ready (None: this
        placement cannot: a Slurm job's lost node is out of its allocation)."""
        return None

    def status_call(self) -> tuple[dict[str, str], str]:
        """The environment and the name `dis-serve status` finds this arm's graph by."""
        return self.env, self.graph

    @property
    def graph(self) -> str:
        return f"bench-mn-{self.name}"

    @property
    def endpoint(self) -> str:
        """Where the graph serves, as it recorded it (https when its frontend speaks TLS):
        the supervisor's state locally, the head agent's `endpoint` file on the others."""
        if self.name == "local":
            return json.loads((self.run_dir / "state.json").read_text())["endpoint"]
        # On Slurm the head agent writes it just after `up` has seen the graph ready.
        written = self.run_dir / "endpoint"
        if not wait_for(written.is_file, 30):
            raise RuntimeError(f"{self.name}: no {written} 30 s after ready")
        return written.read_text().strip()

    def client(self) -> httpx.Client:
        """A client for the endpoint: checked against the graph's CA (and with its client
        certificate, where the run directory has one) when the endpoint is https."""
        if not self.endpoint.startswith("https:"):
            return httpx.Client(timeout=10, trust_env=False)
        tls = self.run_dir / "tls"
        context = ssl.create_default_context(cafile=str(tls / "ca.pem"))
        if (tls / "client.pem").is_file() and (tls / "client-key.pem").is_file():
            context.load_cert_chain(str(tls / "client.pem"), str(tls / "client-key.pem"))
        return httpx.Client(timeout=10, trust_env=False, verify=context)

    @property
    def run_dir(self) -> Path:
        return self.work / "home" / "runs" / self.graph

    def start(self) -> float:
        topology = self.work / f"{self.graph}.yaml"
        topology.write_text(yaml.safe_dump(graph_data(self.name, self.tls)))
        started = time.monotonic()
        up = subprocess.run([DIS_SERVE, "up", str(topology), "--detach"], env=self.env,
                            capture_output=True, text=True, timeout=READY_TIMEOUT_S + 60,
                            check=False)
        took = time.monotonic() - started
        if up.returncode != 0:
            self.stop()
            raise RuntimeError(f"{self.name}: up failed\n{up.stdout[-2000:]}{up.stderr[-2000:]}")
        return took

    def stop(self) -> None:
        down = subprocess.run([DIS_SERVE, "down", self.graph], env=self.env,
                              capture_output=True, text=True, timeout=120, check=False)
        if down.returncode not in (0, 1):  # 1: not running
            print(f"  {self.name}: down exited {down.returncode}: {down.stderr.strip()}")
        kill_recorded(self.run_dir)


@dataclass
class SlurmArm(Arm):
    """The Slurm target; a lost node comes back as a rebooted machine would: its slurmd
    started again (which the next repetitions' jobs need too)."""

    def bring_back(self, node: str) -> float | None:
        """slurmd started again in the node's namespace while the job runs: the node is not
        part of the job any more (None); what Slurm and the graph do meanwhile is recorded
        in `self.node_back`."""
        from slurm_cluster import binary

        # As a rebooted machine: back once Slurm has marked it DOWN (a slurmd back sooner
        # makes Slurm end the whole job: its batch script is missing from the batch node).
        was_down = wait_for(lambda: slurm_node_state(self, node).startswith("down"),
                            SLURMD_TIMEOUT_S * 3, 0.5)
        self.cluster.run_daemon(*self.cluster.command_in(
            node, binary("slurmd"), "-N", node, "-f", str(self.cluster.conf)))
        registered = wait_for(lambda: slurm_node_state(self, node) in {"idle", "mixed",
                                                                        "allocated"}, 30, 0.5)
        time.sleep(10)  # what the job does with a node that re-registered
        self.node_back = {"marked_down_first": was_down, "registered": registered,
                          "node_state": slurm_node_state(self, node),
                          "job_state": slurm_job_state(self),
                          "serves": first_completion(self, time.monotonic() + 10)}
        return None

    node_back: dict = field(default_factory=dict)


def slurm_node_state(arm: Arm, node: str) -> str:
    out = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], env=arm.env,
                         capture_output=True, text=True, check=False, timeout=30)
    return out.stdout.strip().lower()


def slurm_job_state(arm: Arm) -> str:
    """The state of the bed's job (the only one at a time), '' once it has left squeue."""
    out = subprocess.run(["squeue", "-h", "-o", "%T"], env=arm.env, capture_output=True,
                         text=True, check=False, timeout=30)
    return out.stdout.strip()


@dataclass
class HostsArm(Arm):
    """The hosts target: each node's script run in its node's namespace."""

    scripts: dict[str, subprocess.Popen] = field(default_factory=dict)
    runs: int = 0
    script_env: dict[str, str] = field(default_factory=dict)

    def bring_back(self, node: str) -> float | None:
        """The node's script started again, as its operator would after a reboot; seconds
        until `status` says ready (its state files alone would: the dead agent's last)."""
        started = time.monotonic()
        self.scripts |= self.cluster.start_hosts_scripts(self.run_dir, [node], self.script_env)
        if not wait_for(lambda: status_of(self)[0] == 0, RECOVERY_TIMEOUT_S * 2, 0.5):
            return None
        return time.monotonic() - started

    def status_call(self) -> tuple[dict[str, str], str]:
        """Its node scripts run from a rendered directory under <work>/hosts/runs."""
        return self.env | {"DIS_SERVE_HOME": str(self.work / "hosts")}, self.run_dir.name

    @property
    def run_dir(self) -> Path:
        # <root>/runs/<name>, as the agent checks its run root (the parent's parent) is ours.
        return self.work / "hosts" / "runs" / f"{self.graph}-{self.runs}"

    def start(self) -> float:
        from dis_serve.launch.cluster_tls import write_cluster_ca
        from dis_serve.placements.hosts.scripts import render_hosts_files
        from dis_serve.render.run_layout import ENDPOINT_FILE
        from dis_serve.topology import Topology

        self.runs += 1
        run_dir = self.run_dir
        run_dir.mkdir(parents=True)
        topo = Topology.model_validate(graph_data("hosts", self.tls))
        for name, text in render_hosts_files(topo).items():
            (run_dir / name).write_text(text)
        write_cluster_ca(topo, run_dir)  # what `render --target hosts` writes into tls/
        # The scripts call python3 by name, as on a node that has dis-serve installed; the
        # agent makes the mocker's card itself (inside the timing, as on a fresh node).
        env = self.env | {"DIS_SERVE_RUN_DIR": str(run_dir),
                          "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        self.script_env = env
        started = time.monotonic()
        self.scripts = self.cluster.start_hosts_scripts(run_dir, HOSTS, env)
        endpoint = run_dir / ENDPOINT_FILE
        while not endpoint.is_file():
            dead = [n for n, p in self.scripts.items() if p.poll() is not None]
            if dead or time.monotonic() - started > READY_TIMEOUT_S:
                tail = (run_dir / f"node-{(dead or ['n1'])[0]}.out").read_text()[-2000:]
                self.stop()
                raise RuntimeError(f"hosts: not ready (scripts ended: {dead})\n{tail}")
            time.sleep(0.02)
        return time.monotonic() - started

    def stop(self) -> None:
        for node in reversed(list(self.scripts)):  # workers' nodes first, the head last
            self.scripts[node].send_signal(signal.SIGTERM)
        for node, script in self.scripts.items():
            try:
                script.wait(timeout=30)
            except subprocess.TimeoutExpired:
                print(f"  hosts: {node}'s agent ignored SIGTERM for 30 s; SIGKILL")
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(script.pid, signal.SIGKILL)
                script.wait()
        self.scripts.clear()
        kill_recorded(self.run_dir)


def kill_recorded(run_dir: Path) -> None:
    """SIGKILL every process a state file of `run_dir` still names and that still runs
    with the recorded start time (a pid reused since is left alone)."""
    for _, proc in recorded_processes(run_dir):
        pid, created = proc.get("pid"), proc.get("create_time")
        with contextlib.suppress(psutil.Error):
            victim = psutil.Process(pid)
            if created is None or abs(victim.create_time() - created) < 1:
                victim.kill()


# ---------------------------------------------------------------- state and load


def recorded_processes(run_dir: Path) -> list[tuple[dict, dict]]:
    """(node state, process record) for every process in every state file of the run
    (`state.json` locally, `state-<node>.json` per agent)."""
    found = []
    for path in sorted(run_dir.glob("state*.json")):
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        found += [(state, proc) for proc in state.get("processes", [])]
    return found


def process_record(run_dir: Path, name: str) -> dict | None:
    return next((p for _, p in recorded_processes(run_dir) if p["name"] == name), None)


def all_ready(run_dir: Path) -> bool:
    records = recorded_processes(run_dir)
    return bool(records) and all(s.get("phase") == "ready" and p.get("ready")
                                 for s, p in records)


def stream_chat(client: httpx.Client, endpoint: str) -> str | None:
    """One streaming chat (tests/chat_load.py's); None when it streamed to `[DONE]` with the
    tokens asked for, else what went wrong."""
    outcome = one_chat(client, endpoint, MODEL, MAX_TOKENS)
    if outcome.problem is not None:
        return outcome.problem
    return None if outcome.tokens == MAX_TOKENS else f"{outcome.tokens} tokens, not {MAX_TOKENS}"


class Load(ClientThreads):
    """Streaming chats from `clients` threads, each starting one every `interval_s` (a
    fixed arrival rate while the graph keeps up, so the failures of an outage scale with
    its length, not with how fast a refused connection returns); outcomes with their times."""

    def __init__(self, arm: Arm, clients: int = 2, interval_s: float = 0.2) -> None:
        super().__init__(clients, join_timeout_s=15)
        self.arm = arm
        self.endpoint = arm.endpoint
        self.interval_s = interval_s
        self.clients = clients
        self.outcomes: list[tuple[float, float, str | None]] = []

    def _run(self, k: int) -> None:
        with self.arm.client() as client:
            # The clients' starts spread evenly over one interval.
            next_at = time.monotonic() + k * self.interval_s / self.clients
            while not self._stop.wait(max(0.0, next_at - time.monotonic())):
                began = time.monotonic()
                problem = stream_chat(client, self.endpoint)
                self.outcomes.append((began, time.monotonic(), problem))
                next_at = max(next_at + self.interval_s, time.monotonic())

    def failures(self, start: float, end: float) -> list[tuple[float, float, str | None]]:
        return [o for o in list(self.outcomes) if start <= o[1] <= end and o[2] is not None]

    def count(self, start: float, end: float) -> int:
        return sum(1 for o in list(self.outcomes) if start <= o[1] <= end)


def first_completion(arm: Arm, deadline: float) -> bool:
    with arm.client() as client:
        while time.monotonic() < deadline:
            if stream_chat(client, arm.endpoint) is None:
                return True
            time.sleep(0.02)
    return False


def wait_for(predicate, timeout_s: float, poll_s: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll_s)
    return predicate()


# ---------------------------------------------------------------- one fault


def on_head(arm: Arm, name: str) -> str:
    """The process a fault named `name` hits in this arm: the head node's replica or member
    (`frontend-0`) where the graph runs several."""
    return name if process_record(arm.run_dir, name) is not None else f"{name}-0"


def inject(arm: Arm, process: str) -> dict:
    """SIGKILL `process` under load; how long until its node is ready again, the outage
    clients saw and the requests that failed."""
    process = on_head(arm, process)
    before = process_record(arm.run_dir, process)
    if before is None or not before.get("pid"):
        raise RuntimeError(f"{arm.name}: no running {process} in {arm.run_dir}")

    def healed() -> bool:
        now = process_record(arm.run_dir, process)
        return (now is not None and now["pid"] != before["pid"]
                and now["restarts"] > before["restarts"] and all_ready(arm.run_dir))

    with Load(arm) as load:
        time.sleep(1.0)  # the load running before the fault
        warm = load.failures(0, time.monotonic())
        hit = time.monotonic()
        os.kill(before["pid"], signal.SIGKILL)
        recovered = wait_for(healed, RECOVERY_TIMEOUT_S)
        back = time.monotonic()
        time.sleep(SETTLE_S)
        failed = load.failures(hit, back + SETTLE_S)
        total = load.count(hit, back + SETTLE_S)
        after = load.failures(back, back + SETTLE_S) if recovered else []
    reasons = sorted({problem for _, _, problem in failed})
    return {"process": process, "recovered": recovered,
            "ready_again_s": back - hit if recovered else None,
            "outage_s": max((end for _, end, _ in failed), default=hit) - hit,
            "failed": len(failed), "requests": total, "failed_after_ready": len(after),
            "failed_before_fault": len(warm), "reasons": reasons}


def _head_processes(arm: Arm) -> list[int]:
    """Every process of the head node's namespace: on Slurm its slurmd included (started
    again when the node comes back); the hosts arm leaves the bed's slurmd, no part of a
    hosts graph, alone."""
    found = []
    for pid in arm.cluster.processes_in(HEAD_NODE):
        with contextlib.suppress(psutil.Error):
            if arm.name == "slurm" or psutil.Process(pid).name() != "slurmd":
                found.append(pid)
    return found


def status_of(arm: Arm) -> tuple[int, dict]:
    """`dis-serve status --json` of the arm's graph: (exit status, observation)."""
    env, name = arm.status_call()
    out = subprocess.run([DIS_SERVE, "status", name, "--json"], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    try:
        return out.returncode, json.loads(out.stdout)
    except ValueError:
        return out.returncode, {}


def degraded_naming(arm: Arm, node: str) -> bool:
    code, observed = status_of(arm)
    return code == 3 and any(p.startswith(f"node {node}:")
                             for p in observed.get("problems", []))


def inject_head_loss(arm: Arm) -> dict:
    """The head node crashed under load: what new requests saw (failed ones, the last to
    fail, the first to succeed after it), the streams cut, how long until `status` names
    the node; on hosts the node then comes back (its script started again) and how long
    until the graph is ready again with it."""
    head = "node0" if arm.name == "slurm" else HEAD_NODE  # as the placement names it
    with Load(arm) as load:
        time.sleep(1.0)
        pids = _head_processes(arm)
        hit = time.monotonic()
        for sig in (signal.SIGSTOP, signal.SIGKILL):  # none sees another die
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
        named = wait_for(lambda: degraded_naming(arm, head), RECOVERY_TIMEOUT_S, poll_s=0.5)
        named_s = time.monotonic() - hit
        time.sleep(max(0.0, hit + 12 - time.monotonic()))
        back = time.monotonic()
        rejoined = arm.bring_back(HEAD_NODE)
        outcomes = list(load.outcomes)
    new = [o for o in outcomes if o[0] >= hit]
    failed = [o for o in new if o[2] is not None]
    return {"process": HEAD_LOSS, "recovered": named, "ready_again_s": rejoined,
            "outage_s": max((o[0] for o in failed), default=hit) - hit,
            "failed": len(failed), "requests": len(new),
            "failed_after_5s": sum(o[0] >= hit + 5 for o in failed),
            "in_flight_cut": sum(1 for o in outcomes if o[0] < hit < o[1] and o[2]),
            "first_success_s": min((o[1] - hit for o in new if o[2] is None), default=None),
            "degraded_named_s": named_s if named else None,
            "node_back": getattr(arm, "node_back", None),
            "failed_after_node_back": sum(o[0] >= back for o in failed),
            "reasons": sorted({o[2] for o in failed})}


def healthy(arm: Arm) -> bool:
    return all_ready(arm.run_dir) and first_completion(arm, time.monotonic() + 10)


# ---------------------------------------------------------------- the run


def one_rep(arm: Arm, faults: dict[str, str], results: dict) -> None:
    """Bring `arm` up, measure, kill each fault's process in turn (a graph that did not come
    back is brought up again before the next fault), take it down."""
    ready = arm.start()
    try:
        served_by = time.monotonic() + READY_TIMEOUT_S
        began = time.monotonic()
        if not first_completion(arm, served_by):
            raise RuntimeError(f"{arm.name}: ready, but no completion in {READY_TIMEOUT_S} s")
        served = ready + time.monotonic() - began
        results["bringup"][arm.name].append({"ready_s": ready, "served_s": served})
        print(f"  {arm.name:5s} ready after {ready:.2f} s, served after {served:.2f} s",
              flush=True)
        for label, process in faults.items():
            if label == HEAD_LOSS and arm.name == "local":
                continue
            if not healthy(arm):
                print(f"  {arm.name:5s} not healthy before {label}: brought up again")
                arm.stop()
                arm.start()
            row = inject_head_loss(arm) if label == HEAD_LOSS else inject(arm, process)
            results["faults"][label][arm.name].append(row)
            if label == HEAD_LOSS:
                shown = (f"status named the node after {_fmt(row['degraded_named_s'])} s, "
                         f"first success {_fmt(row['first_success_s'])} s, "
                         f"{row['in_flight_cut']} in flight cut, node back: "
                         f"{_fmt(row['ready_again_s'])} s {row['node_back'] or ''}")
            elif row["recovered"]:
                shown = f"ready again after {row['ready_again_s']:.2f} s"
            else:
                shown = f"NOT ready again within {RECOVERY_TIMEOUT_S:.0f} s"
            print(f"  {arm.name:5s} {label}: {shown}, outage {row['outage_s']:.2f} s, "
                  f"{row['failed']}/{row['requests']} failed {row['reasons'] or ''}",
                  flush=True)
    finally:
        arm.stop()


def measure(arms: dict[str, Arm], reps: int, fault_reps: int) -> dict:
    results = {"bringup": {a: [] for a in arms},
               "faults": {label: {a: [] for a in arms} for label in FAULTS}}
    for arm in arms.values():  # warm-up: page cache, model card, the scheduler's first job
        arm.start()
        arm.stop()
    for rep in range(reps):
        order = ARMS[rep % 3:] + ARMS[:rep % 3]  # each arm goes first once in three
        faults = FAULTS if rep < fault_reps else {"worker SIGKILL": WORKER}
        print(f"rep {rep + 1}/{reps} ({', '.join(order)})", flush=True)
        for name in order:
            one_rep(arms[name], faults, results)
    return results


def median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarise(results: dict) -> dict:
    bringup = {arm: {key: median([r[key] for r in rows]) for key in ("ready_s", "served_s")}
               for arm, rows in results["bringup"].items()}
    faults = {}
    for label, per_arm in results["faults"].items():
        faults[label] = {arm: {
            "ready_again_s": median([r["ready_again_s"] for r in rows]),
            "outage_s": median([r["outage_s"] for r in rows]),
            "failed": median([r["failed"] for r in rows]),
            "not_recovered": sum(1 for r in rows if not r["recovered"]),
            "first_success_s": median([r.get("first_success_s") for r in rows]),
            "runs": len(rows)} for arm, rows in per_arm.items() if rows}
    return {"bringup": bringup, "faults": faults}


def ratio(value: float | None, local: float | None) -> float | None:
    return value / local if value is not None and local else None


def _fmt(value: float | None, spec: str = ".2f", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def print_tables(summary: dict, reps: int) -> dict:
    local = summary["bringup"]["local"]
    print(f"\nbring-up, median of {reps} (s; ratio to local)")
    print(f"{'':7s}{'to ready':>18s}{'to first completion':>24s}")
    for arm, row in summary["bringup"].items():
        cells = [f"{_fmt(row[key]):>{width}s} "
                 f"{_fmt(ratio(row[key], local[key]), '.2f', 'x'):>7s}"
                 for key, width in (("ready_s", 10), ("served_s", 16))]
        print(f"{arm:7s}" + "".join(cells))
    worker = summary["faults"]["worker SIGKILL"]
    verdicts = {}
    for arm in ("slurm", "hosts"):
        r = ratio(worker.get(arm, {}).get("ready_again_s"), worker["local"]["ready_again_s"])
        verdicts[arm] = r
        verdict = "-" if r is None else ("meets" if r <= TARGET_RATIO else "misses")
        print(f"recovery after worker SIGKILL, {arm}/local: {_fmt(r, '.2f', 'x')} "
              f"({verdict} the target <= {TARGET_RATIO}x)")
    print("\nfault table (medians; ready again s / client outage s / failed requests; "
          "head node loss: the node back and ready s / first success after s / failed)")
    print(f"{'fault':18s}" + "".join(f"{arm:>26s}" for arm in ARMS))
    for label, per_arm in summary["faults"].items():
        cells = []
        for arm in ARMS:
            row = per_arm.get(arm)
            if row is None:
                cells.append("-")
                continue
            if label == HEAD_LOSS:  # the node back (hosts) / first success after / failed
                cells.append(f"{_fmt(row['ready_again_s'])} / "
                             f"{_fmt(row['first_success_s'])} / {row['failed']:g}")
                continue
            ready = ("not ready" if row["ready_again_s"] is None
                     else f"{row['ready_again_s']:.2f}")
            lost = f" ({row['not_recovered']}/{row['runs']} stuck)" if row["not_recovered"] else ""
            cells.append(f"{ready} / {row['outage_s']:.2f} / {row['failed']:g}{lost}")
        print(f"{label:18s}" + "".join(f"{c:>26s}" for c in cells))
    return verdicts


@contextlib.contextmanager
def bed_lock():
    """The tests' lock: the bed's names and these ports are shared with them."""
    with LOCK.open("a") as handle:
        print(f"waiting for {LOCK} ...", flush=True)
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _terminate_on_signal() -> None:
    """SIGTERM/SIGHUP end the run through the normal clean-up (finally blocks)."""
    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, stop)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--fault-reps", type=int, default=None,
                        help="repetitions that also kill the frontend, etcd and NATS")
    parser.add_argument("--tls", choices=("auto", "off"), default="auto",
                        help="security.tls.mode of every arm (auto: the default)")
    args = parser.parse_args()
    args.fault_reps = args.reps if args.fault_reps is None else args.fault_reps
    from netns_cluster import NetnsCluster, unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: no multi-node test bed here: {reason}")
        return 0
    _terminate_on_signal()
    run_started = time.monotonic()
    with bed_lock(), tempfile.TemporaryDirectory(prefix="multinode-") as tmp:
        work = Path(tmp)
        cluster = NetnsCluster.start(work / "slurm", nodes=3, attacker=False,
                                     slurmd_timeout_s=SLURMD_TIMEOUT_S)
        try:
            home_env = {"DIS_SERVE_HOME": str(work / "home")}
            arms = {"local": Arm("local", work, os.environ | home_env, args.tls),
                    "slurm": SlurmArm("slurm", work, cluster.env | home_env, args.tls,
                                      cluster=cluster),
                    "hosts": HostsArm("hosts", work, os.environ | home_env, args.tls,
                                      cluster=cluster)}
            results = measure(arms, args.reps, args.fault_reps)
        finally:
            cluster.stop()
            shutil.rmtree(work / "home", ignore_errors=True)
    summary = summarise(results)
    verdicts = print_tables(summary, args.reps)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "multinode.json"
    out.write_text(json.dumps({
        "what": "graphs/demo-3node-slurm.yaml: local up vs Slurm (3 namespaces) vs hosts "
                "node scripts (3 namespaces); bring-up and SIGKILL recovery under a streaming "
                "chat load", "reps": args.reps, "fault_reps": args.fault_reps, "tls": args.tls,
        "runs": results, "medians": summary, "recovery_ratio_to_local": verdicts,
        "target_ratio": TARGET_RATIO, "wall_s": time.monotonic() - run_started,
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load_avg_1m_at_end": os.getloadavg()[0]},
    }, indent=2) + "\n")
    print(f"wrote {out} ({time.monotonic() - run_started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
