"""One node's share of a multi-node graph (placements slurm and hosts), supervised there.

`dis-serve agent --node NAME RUN_DIR` runs once on every node of the graph: the Slurm job
starts it with one `srun` per node, a hosts node script `exec`s it. It reads what `up` (or
`render --target hosts`) put in the run directory: `cluster-plan.json`, `topology.json` and,
for Slurm, the `addresses` the batch script found; it resolves the node's processes into a
launch plan (`plan-<node>.json`) and supervises them with the same `Supervisor` as a local
`up`: restart policy and crash budget, liveness, readiness within the model's startup
budget, log rotation, the stop order of `ProcessKind`. Its view goes to `state-<node>.json`
beside the others, where the client reads it.

- The head node's agent runs etcd, NATS and the frontend too, and writes `endpoint` once the
  router sees every worker of the graph, not only its own.
- Any other node's agent first waits (within the same budget) until etcd and NATS on the
  head accept connections, so its workers do not spend their crash budget on a head that is
  still starting.
- The mocker's tokenizer-only card is made here when the run directory lacks it (a hosts
  run directory copied to the nodes), so no node needs `up` to have run on it.
- The supervisor runs under the same keeper as a detached local one (keeper.py): SIGKILLed,
  it is forked again, which starts the node's processes again (about 2 s for the mocker).
- Across nodes the stop follows `ProcessKind.stop_rank` as locally (node_stop.py): the head
  stops NATS and etcd only after the other nodes' workers, as their state files say.
- etcd's and NATS's data are on the head node's own disk (node_data.py), not the shared run
  directory, owned by the head node's agent (a lock its supervisor shares) and removed when
  it stops: by the keeper, or by the supervisor itself when its keeper was killed.

dis-serve reaches the nodes as the Python that runs the agent: the shared virtual
environment `up` submits from (Slurm without a container image), `python3` on the node's PATH
(hosts), or dis-serve installed in the container image.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..coordination.probes import http_client, router_view, tcp_accepts
from ..engines import engine_for
from ..errors import RunError, UserInputError
from ..files.atomic_file import write_atomic
from ..render.balancer import BID_FILE
from ..render.cluster_plan import DATA_DIR_VAR, ClusterPlan, NodeProcesses, resolved_launch_plan
from ..render.launch_plan import ETCD_CLUSTER_STATE_ENV, LaunchPlan, ProcessSpec
from ..render.run_layout import (
    CLUSTER_PLAN_FILE,
    ENDPOINT_FILE,
    ENGINE_CONFIG_DIR,
    STOP_REQUEST_FILE,
    agent_log_name,
    node_plan_file,
    node_state_file,
)
from ..render.shell_words import runtime_names
from ..render.tls_planes import node_pki
from ..topology import ProcessKind, Topology
from ..topology.security import TlsMode
from .agent_contact import keep_in_touch, read_heartbeat
from .cluster_tls import prepare_node_tls
from .disk_space import check_disk, needed_bytes
from .etcd_members import MemberPlace, member_start_state
from .events import describe
from .floating_address import FloatingAddressWatch
from .graph import write_worker_inputs
from .keeper import STOP_SIGNALS, keep_supervised, unblock_stop_signals
from .node_configs import NodeContext, write_node_configs
from .node_data import DataDirClaim, claim_data_dir, coordination_data_dir
from .node_stop import CrossNodeStop
from .plan_watch import PlanWatch
from .rundir import PRIVATE_FILE, RunDir
from .secrets import GraphSecrets
from .startup_budget import worker_startup_budget_s
from .status import GraphStatus
from .supervisor import Supervisor

POLL_S = 0.2


class NodeRunDir(RunDir):
    """The run directory as one node's agent uses it: its own plan, state and log files
    beside the other nodes' (process logs are named by process, unique in the graph)."""

    def __init__(self, path: Path, node: str) -> None:
        super().__init__(path)
        self.node = node

    @property
    def plan_file(self) -> Path:
        return self.path / node_plan_file(self.node)

    @property
    def state_file(self) -> Path:
        return self.path / node_state_file(self.node)

    @property
    def supervisor_log(self) -> Path:
        return self.log_file(agent_log_name(self.node))


def runtime_values(plan: ClusterPlan, node: str, run_dir: Path,
                   environ: dict[str, str] | None = None, *,
                   data_dir: Path) -> dict[str, str]:
    """A value for every run-time variable that this node's processes and the head's use:
    RUN_DIR is `run_dir`, the head's data directory `data_dir` (node_data.py); the others
    come from the batch script's `addresses` file, else the environment (HEAD_ADDRESS,
    NODE_ADDRESS of a hosts node script). UserInputError naming the first one missing."""
    environ = os.environ if environ is None else environ
    found = ({"RUN_DIR": str(run_dir), DATA_DIR_VAR: str(data_dir)}
             | RunDir(run_dir).read_addresses())
    needed = [*node_processes(plan, node).processes, *plan.head.processes]
    names = runtime_names([plan.endpoint, *_strings([p.model_dump(mode="json")
                                                     for p in needed])])
    for name in names:
        if name not in found:
            if name not in environ:
                raise UserInputError(f"{run_dir}/{CLUSTER_PLAN_FILE} needs ${name}, which is "
                                     "not set", key=name,
                                     fix=f"set {name} to the address it names (see the "
                                         "README beside the node scripts)")
            found[name] = environ[name]
    return found


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def node_processes(plan: ClusterPlan, node: str) -> NodeProcesses:
    for candidate in plan.nodes:
        if candidate.name == node:
            return candidate
    names = ", ".join(n.name for n in plan.nodes)
    raise UserInputError(f"graph {plan.name!r} has no node {node!r} (nodes: {names})",
                         key="--node", fix="pass one of those names")


def node_launch_plan(plan: ClusterPlan, node: str, values: dict[str, str], run_dir: Path,
                     topo: Topology) -> tuple[LaunchPlan, LaunchPlan]:
    """(this node's plan, the whole graph's), resolved with the addresses the job found."""
    whole = resolved_launch_plan(plan, values, run_dir).model_copy(
        update={"supervision": topo.supervision})
    mine = {spec.name for spec in node_processes(plan, node).processes}
    own = whole.model_copy(update={"processes": [p for p in whole.processes
                                                 if p.name in mine]})
    return own, whole


def _remote_planes(whole: LaunchPlan, own: LaunchPlan) -> list[list[ProcessSpec]]:
    """The planes this node's processes reach on other nodes, each a group of members of
    which one accepting is enough: etcd unless a member runs here, NATS likewise."""
    mine = {p.kind for p in own.processes}
    return [[p for p in whole.processes if p.kind is kind and p.name not in
             {q.name for q in own.processes}]
            for kind in (ProcessKind.ETCD, ProcessKind.NATS)
            if kind not in mine and any(p.kind is kind for p in whole.processes)]


def _wait_for_planes(whole: LaunchPlan, own: LaunchPlan, deadline: float,
                     stop: threading.Event) -> None:
    """Until a member of each plane this node reaches elsewhere accepts connections (any
    one: a lost node's member is not waited for). RunError at the deadline."""
    groups = _remote_planes(whole, own)
    while not stop.is_set():
        waiting = [group for group in groups
                   if not any(tcp_accepts(p.ports["client"], p.probed_host) for p in group)]
        if not waiting:
            return
        if time.monotonic() > deadline:
            spec = waiting[0][0]
            raise RunError(f"{whole.name}: no {spec.kind.value} member accepts connections "
                           f"(first: {spec.name} at {spec.probed_host}:"
                           f"{spec.ports['client']}); start the agents of the nodes that run "
                           "them")
        stop.wait(POLL_S)


def _write_endpoint_when_complete(whole: LaunchPlan, run_dir: Path,
                                  supervisor: Supervisor) -> None:
    """On the head node: `endpoint` once this node is ready and the router sees every
    worker of the graph."""
    with http_client(tls=whole.endpoint_tls) as client:
        while not supervisor.finished.is_set():
            if supervisor.ready.is_set() and router_view(client, whole).complete:
                write_atomic(run_dir / ENDPOINT_FILE, whole.endpoint + "\n", PRIVATE_FILE)
                print(f"graph ready: every worker registered; serving {whole.model_name} at "
                      f"{whole.endpoint}/v1", flush=True)
                return
            supervisor.finished.wait(POLL_S)


def _write_missing_inputs(topo: Topology, own: LaunchPlan, run_dir: Path) -> None:
    """The model card and engine configs, where the run directory lacks them."""
    card = own.model_path if own.needs_model_card else None
    missing_card = card is not None and not (Path(card) / "config.json").is_file()
    missing_configs = (engine_for(topo.backend).uses_engine_config
                       and not (run_dir / ENGINE_CONFIG_DIR).is_dir())
    if missing_card or missing_configs:
        write_worker_inputs(topo, run_dir, card)


# The services that keep files on the node's own disk (node_data.py).
_NODE_DATA_KINDS = (ProcessKind.ETCD, ProcessKind.NATS, ProcessKind.BALANCER, ProcessKind.VRRP)
# What a change of the running graph starts, drains or starts anew (change/).
_CHANGED_KINDS = (ProcessKind.WORKER, ProcessKind.PLANNER)


def run_agent(run_dir: Path, node: str) -> int:
    """Supervise `node`'s processes until SIGTERM/SIGINT/SIGHUP or failure; the exit status
    (0 after a requested stop, 1 after a failure). The supervisor runs under a keeper
    (keeper.py), as a detached local one does: killed, it is back at once."""
    run = NodeRunDir(run_dir.resolve(), node)
    topo = run.read_topology()
    cluster = run.read_cluster_plan()
    share_of = node_processes(cluster, node)
    data_dir = coordination_data_dir(topo, os.environ, node)
    values = runtime_values(cluster, node, run.path, data_dir=data_dir)
    own, whole = node_launch_plan(cluster, node, values, run.path, topo)
    run.prepare()
    # Owned before anything starts; a start refused here leaves the holder's data alone.
    claim = (claim_data_dir(data_dir, topo.name)
             if any(p.kind in _NODE_DATA_KINDS for p in share_of.processes) else None)
    try:
        # After the claim emptied the data directory of a killed agent's leftovers.
        check_disk(f"{topo.name} on node {node}", needed_bytes(own, topo, data_dir),
                   fix="point coordination.data_dir (etcd's and NATS's data) or the run "
                       "directory at a larger disk")
        _write_missing_inputs(topo, own, run.path)
        secrets = prepare_node_tls(topo, share_of, values, run.path)
        write_node_configs(NodeContext(topo=topo, plan=cluster, whole=whole, node=share_of,
                                       values=values, run_dir=run.path, data_dir=data_dir))
        own = _with_member_state(topo, own, whole, node, run.path)
        write_atomic(run.plan_file, own.model_dump_json(indent=2), PRIVATE_FILE)
        share = _NodeShare(run, topo, cluster, own, whole, secrets, values, data_dir)
        return keep_supervised(run, _orphan_cleanup(share, claim))
    finally:
        if claim is not None:  # the agent stops for good: its node's data goes with it
            claim.release()


def _with_member_state(topo: Topology, own: LaunchPlan, whole: LaunchPlan, node: str,
                       run_dir: Path) -> LaunchPlan:
    """The node's plan with its etcd member told how to start (etcd_members.py): a new
    cluster, or joining the one the other members run."""
    mine = [p for p in own.processes if p.kind is ProcessKind.ETCD]
    members = [p for p in whole.processes if p.kind is ProcessKind.ETCD]
    if not mine or len(members) < 2:
        return own
    spec = mine[0]
    scheme = "https" if topo.security.tls.mode is not TlsMode.OFF else "http"
    peer_port, client_port = spec.ports["peer"], spec.ports["client"]
    place = MemberPlace(name=node, peer_url=f"{scheme}://{spec.probed_host}:{peer_port}",
                        others=[f"{scheme}://{p.probed_host}:{client_port}"
                                for p in members if p.name != spec.name])
    state = member_start_state(place, node_pki(topo.security, run_dir, node))
    updated = spec.model_copy(update={"env": {**spec.env, ETCD_CLUSTER_STATE_ENV: state}})
    return own.model_copy(update={"processes": [updated if p is spec else p
                                                for p in own.processes]})


def _orphan_cleanup(share: _NodeShare, claim: DataDirClaim | None) -> Callable[[], int]:
    """The keeper's `supervise`: the node's supervisor, which also removes the data
    directory when it ends for good after its keeper was killed (no one else would)."""
    keeper = os.getpid()

    def supervise() -> int:
        code = _supervise_node(share)
        if claim is not None and os.getppid() != keeper:
            claim.release()
        return code
    return supervise


@dataclass(frozen=True)
class _NodeShare:
    """What one node's supervisor runs: its plan, and the whole graph's it waits for."""

    run: NodeRunDir
    topo: Topology
    cluster: ClusterPlan
    own: LaunchPlan
    whole: LaunchPlan
    secrets: GraphSecrets
    values: dict[str, str]
    data_dir: Path
    """The node's own data directory (node_data.py)."""

    @property
    def node(self) -> str:
        return self.run.node

    def say(self, line: str) -> None:
        print(f"[{self.node}] {line}", flush=True)

    def read_own_plan(self) -> LaunchPlan:
        """This node's share of the cluster plan as it is now (a change of the running
        graph raised its revision), resolved with the addresses found at start, and written
        to plan-<node>.json for the client as at start."""
        topo = self.run.read_topology()
        own, _whole = node_launch_plan(self.run.read_cluster_plan(), self.node, self.values,
                                       self.run.path, topo)
        # A change moves workers and the planner; the node's services keep what they were
        # started with (an etcd member's start state is decided once: _with_member_state).
        started = {p.name: p for p in self.own.processes if p.kind not in _CHANGED_KINDS}
        own = own.model_copy(update={"processes": [started.get(p.name, p)
                                                   for p in own.processes]})
        write_atomic(self.run.plan_file, own.model_dump_json(indent=2), PRIVATE_FILE)
        return own

    def other_states(self) -> dict[str, GraphStatus | None]:
        """The other nodes' agents' last view (state-<node>.json), None where none is or
        where the agent is gone (its heartbeat stale: a lost node's last view, which would
        hold the stop back for nothing)."""
        found = {}
        for node in self.cluster.nodes:
            if node.name == self.node:
                continue
            beat = read_heartbeat(self.run.path, node.name)
            found[node.name] = (None if beat is None or beat.stale
                                else NodeRunDir(self.run.path, node.name).read_state())
        return found


def _supervise_node(share: _NodeShare) -> int:
    """The keeper's child: this node's supervisor, until stopped or failed."""
    budget = worker_startup_budget_s(share.topo)
    stop = threading.Event()
    supervisor = Supervisor(share.own, share.run, ready_timeout_s=budget,
                            secrets=share.secrets,
                            on_event=lambda event: share.say(describe(event)),
                            before_stopping=CrossNodeStop(share.other_states, say=share.say),
                            plan_source=PlanWatch(share.run.path / CLUSTER_PLAN_FILE,
                                                  share.read_own_plan))
    def on_stop(signum: int, _frame: object) -> None:
        if supervisor.stop_requested:
            return  # a second signal, perhaps inside the first one's Event.set (its lock)
        # os.write, not print: a handler must not re-enter the buffered stdout it interrupted
        os.write(1, f"[{share.node}] {signal.Signals(signum).name}: stopping\n".encode())
        supervisor.request_stop()
        stop.set()

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_stop)
    unblock_stop_signals()  # held back by the keeper's fork
    keep_in_touch(share.run.path, share.node,
                  lambda: (share.say(f"{STOP_REQUEST_FILE}: stopping"), stop.set(),
                           supervisor.request_stop()))
    if _remote_planes(share.whole, share.own):
        share.say("waiting for the etcd and NATS members on the other nodes")
        _wait_for_planes(share.whole, share.own, time.monotonic() + budget, stop)
        if stop.is_set():
            return 0
    watch = _floating_address_watch(share)
    thread = threading.Thread(target=supervisor.run, name=f"agent-{share.node}")
    thread.start()
    if any(p.kind is ProcessKind.FRONTEND for p in share.own.processes):
        threading.Thread(target=_write_endpoint_when_complete,
                         args=(share.whole, share.run.path, supervisor),
                         name="endpoint", daemon=True).start()
    # Short slices: the main thread must stay responsive to signals.
    while not supervisor.finished.wait(0.5) and thread.is_alive():
        pass
    thread.join()
    if watch is not None:
        watch.stop()
    return 1 if supervisor.error else 0


def _floating_address_watch(share: _NodeShare) -> FloatingAddressWatch | None:
    """On a node that takes part in the floating address: its takeover bid, kept up to
    date while the supervisor runs (floating_address.py)."""
    floating = share.topo.frontend.floating_address
    if floating is None or not any(p.kind is ProcessKind.VRRP for p in share.own.processes):
        return None
    others = [n.name for n in share.cluster.nodes if n.name != share.node
              and any(p.kind is ProcessKind.VRRP for p in n.processes)]
    watch = FloatingAddressWatch(address=floating.address, node=share.node, others=others,
                                 run_dir=share.run.path, bid_file=share.data_dir / BID_FILE)
    watch.start()
    return watch
