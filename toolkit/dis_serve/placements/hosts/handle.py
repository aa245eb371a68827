"""The graph handle of placement hosts: a run directory prepared here, copied to (or shared
with) every node, where each node's script hands over to its agent (`dis-serve agent`).

dis-serve cannot start processes on another machine, so `start` prepares the run directory
(`dis-serve prepare`, or `up`, which then waits for the nodes) and says what to run where.
Everything after goes through that directory, as on Slurm: each agent's `state-<node>.json`
and heartbeat for `status` (cluster/view.py), the logs under `logs/`, `stop-request` for
`down` and a request file per fault (agent_contact.py), since the client cannot signal pids
on other machines.
`status` sees what reaches this machine's copy: share the directory (NFS, as Slurm sites
do) or copy it back.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import PreflightError, RunError
from ...launch.agent_contact import request_fault, request_stop
from ...launch.node_data import clear_data, data_dir_nodes
from ...launch.rundir import RunDir
from ...launch.status import GraphPhase
from ...render.cluster_plan import ClusterPlan
from ...topology import PlacementKind
from ..cluster.handle import ClusterHandle, cluster_record
from ..cluster.rendering import write_inputs
from ..cluster.view import agents_running, look_at_nodes, observe_cluster
from ..reports import (
    ObservedGraph,
    StartOptions,
    StartReport,
    StopReport,
)
from ..shared_files import write_files

if TYPE_CHECKING:
    from ...launch.faults import FaultOrder
    from ...launch.run_record import RunRecord
    from ...render.cluster_plan import NodeProcesses
    from ...topology import Topology
    from ..cluster.live import PlanRenderer

POLL_S = 0.2
STOP_TIMEOUT_S = 60.0
REQUEST_TAKEN_S = 10.0


def prepare_hosts_run(topo: Topology, run: RunDir) -> ClusterPlan:
    """Write the complete run directory, as `render` writes it (the same function): node
    scripts, README, cluster plan, topology, engine configs, the graph's CA, client
    certificate and NATS token (each agent signs its own node's server certificate), the
    mocker's model card. PreflightError while its agents run."""
    from .scripts import hosts_run_files

    if run.cluster_plan_file.is_file() and agents_running(
            look_at_nodes(run, run.read_cluster_plan())):
        raise PreflightError(f"graph {topo.name!r} is running on its nodes; stop it with "
                             f"`dis-serve down {topo.name}` or give this graph another name")
    run.clear_earlier_run()
    run.prepare()
    made = hosts_run_files(topo)
    write_files(made.files, run.path)
    write_inputs(topo, made.plan, run.path)
    plan = made.plan
    run.write_record(cluster_record(topo, plan, PlacementKind.HOSTS, str(run.path.resolve())))
    return plan


def steps(plan: ClusterPlan, run: RunDir) -> list[str]:
    name = plan.name
    lines = [f"prepared {run.path} (placement hosts; README.md there says the same)",
             f"1. copy {run.path} to the same path on every node, or put it on storage they "
             "all mount (then `status` here sees the agents)"]
    for i, node in enumerate(sorted(plan.nodes, key=lambda n: not n.head), start=2):
        lines.append(f"{i}. on {node.name} ({node.address}): {run.path}/node-{node.name}.sh"
                     + (" (head: etcd, NATS, frontend)" if node.head else ""))
    lines.append(f"then: dis-serve status {name} | dis-serve logs --name {name} | "
                 f"dis-serve doctor {name} | dis-serve down {name}")
    return lines


class AgentRequests:
    """How the client reaches a hosts node's agent: a request file in the run directory the
    agent takes (and deletes) within a second. A node whose agent is hung cannot take one:
    fault it again after it continues."""

    def __init__(self, run: RunDir) -> None:
        self._run = run

    def inflict(self, node: NodeProcesses, request: FaultOrder,
                say: Callable[[str], None]) -> None:
        args = request.inflict_args()
        path = request_fault(self._run.path, node.name, args)
        deadline = time.monotonic() + REQUEST_TAKEN_S
        while path.exists():
            if time.monotonic() > deadline:
                path.unlink(missing_ok=True)
                raise RunError(f"{self._run.name}: the agent of node {node.name} did not take "
                               f"the fault request within {REQUEST_TAKEN_S:g} s (hung, or not "
                               "running?)")
            time.sleep(0.1)
        say(f"[{node.name}] its agent started: inflict {shlex.join(args)}")
        if request.duration_s:
            time.sleep(request.duration_s)


class HostsHandle(ClusterHandle):
    kind = PlacementKind.HOSTS

    def __init__(self, run: RunDir, topo: Topology | None = None,
                 record: RunRecord | None = None) -> None:
        super().__init__(run, topo, record)
        self._timeout_s: float | None = None

    def _plan_renderer(self) -> PlanRenderer:
        from .scripts import render_hosts_plan

        return render_hosts_plan

    def _reach(self) -> AgentRequests:
        return AgentRequests(self._run)

    def start(self, options: StartOptions) -> StartReport:
        from ...launch.startup_budget import readiness_timeout_s

        topo = self._topology_to("prepare", "dis-serve prepare")
        plan = prepare_hosts_run(topo, self._run)
        self._record = self._run.read_record()
        self._timeout_s = readiness_timeout_s(topo, options.ready_timeout_s)
        return StartReport(notes=steps(plan, self._run))

    def prepare(self, source: str | None = None) -> list[str]:
        """`dis-serve prepare`: the run directory to copy to the nodes; what to run where."""
        return self.start(StartOptions()).notes

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        """Until the agents the user starts on the nodes have the graph ready."""
        if self._timeout_s is None:
            return self.status()
        deadline = time.monotonic() + self._timeout_s
        while True:
            observed = self.status()
            if on_update is not None:
                on_update(observed)
            if observed.phase is GraphPhase.READY:
                return observed
            if observed.phase is GraphPhase.FAILED:
                raise RunError(f"{self.name}: {'; '.join(observed.problems)}; agents' logs "
                               f"in {self._run.logs}")
            if time.monotonic() > deadline:
                why = "".join(f"; {problem}" for problem in observed.problems)
                raise RunError(f"{self.name}: not ready after {self._timeout_s:g} s{why}; "
                               "are the node scripts running? (see "
                               f"{self._run.path}/README.md)")
            time.sleep(POLL_S)

    def watch(self, on_change: Callable[[ObservedGraph], None]) -> ObservedGraph:
        shown = self.status().phase
        while True:
            time.sleep(1.0)
            observed = self.status()
            if not observed.supervisor_alive:
                return observed
            if observed.phase is not shown and observed.phase.serving:
                shown = observed.phase
                on_change(observed)

    def status(self) -> ObservedGraph:
        plan = self._run.read_cluster_plan()
        looks = look_at_nodes(self._run, plan)
        started = [look for look in looks if look.started]
        alive = [look for look in started if not look.gone]
        cleanly_stopped = bool(started) and all(
            look.state is not None and look.state.phase.finished for look in started)
        who = (f"agents on {len(alive)} of {len(looks)} nodes" if started
               else "no node agent has started yet")
        return observe_cluster(self._run, plan, placement=PlacementKind.HOSTS,
                               running=not cleanly_stopped, supervisor=who,
                               supervisor_alive=bool(alive) or not started)

    def is_active(self) -> bool:
        return agents_running(look_at_nodes(self._run, self._run.read_cluster_plan()))

    def stop(self) -> StopReport:
        """Write `stop-request`; each agent stops its node in order. Waits until every
        agent that ran has stopped (or is gone), then removes what a killed head agent left
        of etcd's and NATS's data on this machine."""
        plan = self._run.read_cluster_plan()
        if not agents_running(look_at_nodes(self._run, plan)):
            return StopReport(name=self.name, was_running=False,
                              lines=[f"{self.name} is not running (no node agent is)",
                                     *self._cleared()])
        request_stop(self._run.path)
        start = time.monotonic()
        while agents_running(looks := look_at_nodes(self._run, plan)):
            if time.monotonic() - start > STOP_TIMEOUT_S:
                left = ", ".join(look.node.name for look in looks
                                 if look.started and not look.gone)
                raise RunError(f"{self.name}: the agents on {left} have not stopped "
                               f"{STOP_TIMEOUT_S:g} s after the stop request; see "
                               f"{self._run.logs}")
            time.sleep(POLL_S)
        return StopReport(name=self.name, was_running=True, lines=[
            f"stopped {self.name} (every node agent stopped its node after "
            f"{time.monotonic() - start:.1f} s)", *self._cleared()])

    def _cleared(self) -> list[str]:
        """The nodes' data directories left by agents killed outright, on this machine
        (node_data.py); elsewhere the next start there removes them."""
        paths = clear_data(self._run.read_topology(), os.environ, data_dir_nodes(self._run))
        return [f"removed {path}, which no agent owned any more" for path in paths]
