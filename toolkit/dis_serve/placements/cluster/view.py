"""One look at a multi-node graph (placements slurm and hosts) from the client: each node's
agent state (`state-<node>.json`), its heartbeat (agent_contact.py) and the frontend's
router view, folded into the processes, phase and problems of one `ObservedGraph`.

The cross-node phase: `ready` when every node is ready and the router sees every worker;
`degraded` once the graph has served when a node is hung or gone (stale heartbeat, dead
agent, agent stopped or failed while the graph should run) or has processes that are not
ready, as long as every role (etcd, NATS, the frontend, each worker type) still has a
ready process on a live node, or the live agent holding it is healing it; `failed` when a
role's every process sits on gone nodes (nothing will bring it back); `starting` before it
first served. The head's `endpoint` file says it has served.

Before the graph first served, a stale heartbeat alone does not make a node lost: an agent
that was heard from and has been quiet for less than the startup budget (startup_budget.py)
counts as starting and is named as quiet, because a loaded or paused machine silences a
healthy agent for seconds, and `up` cancels a start it judges failed. A dead agent, or one
that stopped or failed, is lost at once; `up`'s own deadline judges the rest.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ...files.private_path import read_own_text
from ...launch.agent_contact import Heartbeat, read_heartbeat
from ...launch.change_record import describe_change
from ...launch.rundir import RunDir
from ...launch.startup_budget import worker_startup_budget_s
from ...launch.status import GraphPhase, GraphStatus, ProcessState
from ...render.cluster_plan import ClusterPlan, NodeProcesses
from ...render.launch_plan import LaunchPlan, ProcessSpec
from ...render.run_layout import (
    AGENT_FILE_GLOBS,
    ENDPOINT_FILE,
    agent_log_name,
    node_plan_file,
    node_state_file,
)
from ...security.pki_files import EndpointTls
from ...topology import PlacementKind
from ..reports import ObservedGraph, ObservedProcess


def agent_files(run: RunDir) -> tuple[str, ...]:
    """Names of the files an earlier run's agents left in the run directory."""
    if not run.path.is_dir():
        return ()
    return tuple(sorted({p.name for pattern in AGENT_FILE_GLOBS
                         for p in run.path.glob(pattern)}))


@dataclass(frozen=True)
class NodeLook:
    """One node as the run directory shows it now."""

    node: NodeProcesses
    state: GraphStatus | None
    heartbeat: Heartbeat | None

    @property
    def started(self) -> bool:
        return self.state is not None or self.heartbeat is not None

    @property
    def finished(self) -> bool:
        return self.state is not None and self.state.phase.finished

    @property
    def gone(self) -> bool:
        """Its agent ran and is not heard from now: stopped, failed, dead or silent for
        HEARTBEAT_STALE_S (nothing to wait for, nothing to scrape)."""
        if not self.started:
            return False
        return self.finished or self.heartbeat is None or self.heartbeat.stale

    def quiet(self, starting_grace_s: float | None) -> bool:
        """Gone only by its silence, and for no longer than `starting_grace_s` (None: no
        grace, the graph has served): a slow start, not yet a lost node."""
        if starting_grace_s is None or not self.gone or self.finished:
            return False
        beat = self.heartbeat
        return beat is None or (not beat.agent_dead_here and beat.age_s <= starting_grace_s)

    def lost(self, starting_grace_s: float | None) -> bool:
        """Gone for the graph's phase: gone and not merely quiet while starting."""
        return self.gone and not self.quiet(starting_grace_s)

    def problem(self, starting_grace_s: float | None = None) -> str | None:
        name = self.node.name
        if self.finished:
            assert self.state is not None
            why = f": {self.state.error}" if self.state.error else ""
            return f"node {name}: its agent has {self.state.phase.value}{why}"
        if self.quiet(starting_grace_s):
            quiet = ("not written its heartbeat" if self.heartbeat is None
                     else f"been quiet for {self.heartbeat.age_s:.0f} s")
            return (f"node {name}: its agent has {quiet} while the graph starts (lost after "
                    f"{starting_grace_s:g} s, the startup budget)")
        if self.gone:
            if self.heartbeat is not None and self.heartbeat.agent_dead_here:
                return f"node {name}: its agent (pid {self.heartbeat.pid}) is dead"
            age = "never" if self.heartbeat is None else f"{self.heartbeat.age_s:.0f} s ago"
            return (f"node {name}: its agent was last heard from {age} (hung, killed, or the "
                    "node is down or cut off)")
        return None


def read_node_state(run: RunDir, node: str) -> GraphStatus | None:
    try:
        return GraphStatus.model_validate_json(read_own_text(run.path / node_state_file(node)))
    except (OSError, ValueError, ValidationError):
        return None


def look_at_nodes(run: RunDir, plan: ClusterPlan, now: float | None = None) -> list[NodeLook]:
    now = time.time() if now is None else now
    return [NodeLook(node=n, state=read_node_state(run, n.name),
                     heartbeat=read_heartbeat(run.path, n.name, now)) for n in plan.nodes]


def read_node_plan(run: RunDir, node: str) -> LaunchPlan | None:
    """The node's processes as its agent resolved them (`plan-<node>.json`: its own
    address in every probe and advertised host); None until it has written it."""
    try:
        return LaunchPlan.model_validate_json(read_own_text(run.path / node_plan_file(node)))
    except (OSError, ValueError, ValidationError):
        return None


def node_plans(run: RunDir, plan: ClusterPlan) -> LaunchPlan | None:
    """The whole graph's plan, resolved with every address, from the plans each node's agent
    wrote (`plan-<node>.json`); None until every agent has written its own."""
    parts = []
    for node in plan.nodes:
        part = read_node_plan(run, node.name)
        if part is None:
            return None
        parts.append(part)
    head = next(p for p, n in zip(parts, plan.nodes, strict=True) if n.head)
    return head.model_copy(update={"processes": [s for p in parts for s in p.processes]})


def has_served(run: RunDir) -> bool:
    return (run.path / ENDPOINT_FILE).is_file()


def role_of(spec: ProcessSpec) -> str:
    """What the graph needs one of: each worker type, and each process that serves alone."""
    return spec.role.worker_type if spec.role is not None else spec.kind.value


def node_processes_observed(look: NodeLook, running: bool, *,
                            starting_grace_s: float | None) -> list[ObservedProcess]:
    """The node's processes; a lost node's live-looking ones show as gone, a quiet one's as
    it last said, not ready, each with why."""
    name = look.node.name
    if look.state is None:
        state = ProcessState.PENDING if running else ProcessState.STOPPED
        return [ObservedProcess(name=p.name, node=name, state=state)
                for p in look.node.processes]
    found = []
    why = look.problem(starting_grace_s) if running and look.gone else None
    lost = look.lost(starting_grace_s)
    for proc in look.state.processes:
        current, ready = proc.state, proc.ready and not look.gone
        if not running and current.alive:
            current, ready = ProcessState.STOPPED, False
        elif lost and current.alive:
            current = ProcessState.GONE
        found.append(ObservedProcess(name=proc.name, node=name, pid=proc.pid, state=current,
                                     ports=dict(proc.ports), restarts=proc.restarts,
                                     ready=ready, joining=proc.joining, why=why))
    return found


@dataclass(frozen=True)
class ClusterFold:
    phase: GraphPhase
    processes: list[ObservedProcess]
    problems: list[str]


def fold(looks: list[NodeLook], *, running: bool, served: bool, router_complete: bool,
         starting_grace_s: float, router: str | None = None) -> ClusterFold:
    """The graph's phase, processes and problems from every node's look (pure).
    `starting_grace_s`: how long an agent may be quiet before the graph first served and
    still count as starting (the startup budget); once it served, HEARTBEAT_STALE_S."""
    grace = None if served else starting_grace_s
    processes = [p for look in looks for p in node_processes_observed(look, running,
                                                                   starting_grace_s=grace)]
    if not running:
        return ClusterFold(GraphPhase.STOPPED, processes, [])
    nodes = [p for look in looks if (p := look.problem(grace))]
    problems = list(nodes)
    for look in looks:
        if look.state is not None and not look.gone:
            problems += [f"node {look.node.name}: {p}" for p in look.state.problems]
            problems += [f"node {look.node.name}: {p.name} is {p.state.value}"
                         for p in look.state.processes
                         if not p.ready and not any(p.name in q for q in look.state.problems)]
    if not served:
        if any(look.lost(grace) for look in looks):
            return ClusterFold(GraphPhase.FAILED, processes, problems)
        return ClusterFold(GraphPhase.STARTING, processes, nodes)  # only the quiet nodes
    if not problems and router_complete:
        return ClusterFold(GraphPhase.READY, processes, [])
    if not router_complete and router:
        problems.append(f"router: sees {router}")
    return ClusterFold(_serving_phase(looks, processes), processes, problems)


def _serving_phase(looks: list[NodeLook], processes: list[ObservedProcess]) -> GraphPhase:
    """Degraded while every role has a ready process, or one on a live node to heal it;
    failed when a role's processes are all on gone nodes."""
    ready = {p.name for p in processes if p.ready}
    roles: dict[str, list[tuple[ProcessSpec, NodeLook]]] = {}
    for look in looks:
        for spec in look.node.processes:
            roles.setdefault(role_of(spec), []).append((spec, look))
    for members in roles.values():
        if any(spec.name in ready for spec, _ in members):
            continue
        if all(look.gone for _, look in members):
            return GraphPhase.FAILED
    return GraphPhase.DEGRADED


def endpoint_of(run: RunDir) -> str | None:
    try:
        return Path(run.path / ENDPOINT_FILE).read_text().strip() or None
    except OSError:
        return None


def endpoint_tls_here(run: RunDir, plan: ClusterPlan) -> EndpointTls | None:
    """What a client on this machine needs for the graph's HTTPS frontend: the CA (and client
    certificate) in the run directory as this machine sees it."""
    return plan.endpoint_tls_with({"RUN_DIR": str(run.path)})


def observe_cluster(run: RunDir, plan: ClusterPlan, *, placement: PlacementKind,
                    running: bool, supervisor: str, supervisor_alive: bool,
                    client=None) -> ObservedGraph:  # client: httpx.Client
    """One look at the whole graph: the nodes' files, and the router once it has served
    (`client` must trust the graph's CA when its frontend serves HTTPS: endpoint_tls_here)."""
    from ...coordination.probes import PROBE_TIMEOUT_S, router_view
    from ...security.http_client import direct_client

    looks = look_at_nodes(run, plan)
    served = running and has_served(run)
    whole = node_plans(run, plan)
    tls = endpoint_tls_here(run, plan)
    complete, router = False, None
    if served and whole is not None:
        own = client or direct_client(PROBE_TIMEOUT_S, 0.5, tls=tls)
        try:
            view = router_view(own, whole)
            complete, router = view.complete, view.describe()
        finally:
            if client is None:
                own.close()
    folded = fold(looks, running=running, served=served, router_complete=complete,
                  starting_grace_s=worker_startup_budget_s(run.read_topology()),
                  router=router)
    return ObservedGraph(
        name=plan.name, placement=placement, phase=folded.phase, run_dir=str(run.path),
        model_name=plan.model_name, endpoint=endpoint_of(run) if served else None,
        endpoint_tls=tls,
        processes=folded.processes, supervisor=supervisor, supervisor_alive=supervisor_alive,
        router=router, problems=folded.problems, change=describe_change(run.path),
        error=next((look.state.error for look in looks
                    if look.state is not None and look.state.error), None)
        if folded.phase is GraphPhase.FAILED else None)


def agent_log_names(run: RunDir) -> list[str]:
    """`logs` names of the node agents' own logs (agent-<node>), in node order."""
    try:
        return [agent_log_name(node.name) for node in run.read_cluster_plan().nodes]
    except (OSError, ValueError):
        return []


def agents_running(looks: list[NodeLook]) -> bool:
    return any(look.started and not look.gone for look in looks)
