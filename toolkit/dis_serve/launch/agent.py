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

dis-serve reaches the nodes as the Python that runs the agent: the shared virtual
environment `up` submits from (Slurm without a container image), `python3` on the node's PATH
(hosts), or dis-serve installed in the container image.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from ..atomic_file import write_atomic
from ..errors import RunError, UserInputError
from ..probes import http_client, listen_host, router_view, tcp_accepts
from ..render.cluster_plan import (
    CLUSTER_PLAN_FILE,
    ClusterPlan,
    NodeProcesses,
    resolved_launch_plan,
)
from ..render.launch_plan import ENGINE_CONFIG_DIR, LaunchPlan
from ..render.shell_words import runtime_names
from ..render.slurm import ENDPOINT_FILE
from ..startup_budget import worker_startup_budget_s
from ..topology import ProcessKind, Topology
from .cluster_tls import prepare_node_tls
from .events import describe
from .graph import write_worker_inputs
from .rundir import PRIVATE_FILE, RunDir
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
        return self.path / f"plan-{self.node}.json"

    @property
    def state_file(self) -> Path:
        return self.path / f"state-{self.node}.json"

    @property
    def supervisor_log(self) -> Path:
        return self.logs / f"agent-{self.node}.log"


def runtime_values(plan: ClusterPlan, node: str, run_dir: Path,
                   environ: dict[str, str] | None = None) -> dict[str, str]:
    """A value for every run-time variable that this node's processes and the head's use:
    RUN_DIR is `run_dir`; the others come from the batch script's `addresses` file, else the
    environment (HEAD_ADDRESS, NODE_ADDRESS of a hosts node script). UserInputError naming
    the first one missing."""
    environ = os.environ if environ is None else environ
    found = {"RUN_DIR": str(run_dir)} | RunDir(run_dir).read_addresses()
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


def _wait_for_head(whole: LaunchPlan, deadline: float, stop: threading.Event) -> None:
    """Until etcd and NATS on the head node accept connections (RunError at the deadline)."""
    infra = [p for p in whole.processes if p.kind in (ProcessKind.ETCD, ProcessKind.NATS)]
    targets = [(spec.name, listen_host(spec), spec.ports["client"]) for spec in infra]
    while not stop.is_set():
        waiting = [t for t in targets if not tcp_accepts(t[2], t[1])]
        if not waiting:
            return
        if time.monotonic() > deadline:
            name, host, port = waiting[0]
            raise RunError(f"{whole.name}: {name} on the head node ({host}:{port}) does not "
                           "accept connections; start the head node's agent first")
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
    missing_configs = topo.backend.uses_engine_config and not (run_dir / ENGINE_CONFIG_DIR).is_dir()
    if missing_card or missing_configs:
        write_worker_inputs(topo, run_dir, card)


def run_agent(run_dir: Path, node: str) -> int:
    """Supervise `node`'s processes until SIGTERM/SIGINT/SIGHUP or failure; the exit status
    (0 after a requested stop, 1 after a failure)."""
    run = NodeRunDir(run_dir.resolve(), node)
    topo = run.read_topology()
    cluster = run.read_cluster_plan()
    values = runtime_values(cluster, node, run.path)
    own, whole = node_launch_plan(cluster, node, values, run.path, topo)
    run.prepare()
    write_atomic(run.plan_file, own.model_dump_json(indent=2), PRIVATE_FILE)
    _write_missing_inputs(topo, own, run.path)
    secrets = prepare_node_tls(topo, node_processes(cluster, node), values, run.path)
    budget = worker_startup_budget_s(topo)
    stop = threading.Event()
    supervisor = Supervisor(own, run, ready_timeout_s=budget, secrets=secrets,
                            on_event=lambda event: print(f"[{node}] {describe(event)}",
                                                         flush=True))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: (stop.set(), supervisor.request_stop()))
    head = node_processes(cluster, node).head
    if not head:
        print(f"[{node}] waiting for etcd and NATS on the head node", flush=True)
        _wait_for_head(whole, time.monotonic() + budget, stop)
        if stop.is_set():
            return 0
    thread = threading.Thread(target=supervisor.run, name=f"agent-{node}")
    thread.start()
    if head:
        threading.Thread(target=_write_endpoint_when_complete, args=(whole, run.path,
                                                                     supervisor),
                         name="endpoint", daemon=True).start()
    # Short slices: the main thread must stay responsive to signals.
    while not supervisor.finished.wait(0.5) and thread.is_alive():
        pass
    thread.join()
    return 1 if supervisor.error else 0
