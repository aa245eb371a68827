"""What the handles of multi-node graphs (hosts, Slurm) share: the cluster plan every node's
agent runs its share of, the views the agents write beside each other (view.py), and faults
through the placement's way of reaching a node's agent (`NodeReach`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import UserInputError
from ..run_handle import RunHandle
from .view import agent_log_names, node_plans

if TYPE_CHECKING:
    from ...coordination.doctor import DoctorTarget
    from ...launch.faults import FaultOrder
    from ...launch.run_record import RunRecord
    from ...observe.frame import GraphLayout
    from ...render.cluster_plan import ClusterPlan, NodeProcesses
    from ...render.launch_plan import LaunchPlan
    from ...topology import PlacementKind, Topology
    from ..base import NodeReach
    from .live import ClusterLive, PlanRenderer


class ClusterHandle(RunHandle):
    """A multi-node graph's handle; subclasses say how it starts, is watched and stops."""

    kind: PlacementKind

    def _reach(self) -> NodeReach:
        raise NotImplementedError

    def _plan_renderer(self) -> PlanRenderer:
        """The placement's cluster plan of a topology with given worker slots."""
        raise NotImplementedError

    def live(self) -> ClusterLive:
        from .live import ClusterLive

        return ClusterLive(self._run, self._plan_renderer())

    def process_names(self) -> list[str]:
        plan = self._run.read_cluster_plan()
        return [p.name for n in plan.nodes for p in n.processes] + agent_log_names(self._run)

    def resolved_plan(self) -> LaunchPlan:
        """The whole graph's plan from what every node's agent resolved."""
        plan = node_plans(self._run, self._run.read_cluster_plan())
        if plan is None:
            raise FileNotFoundError(f"{self._run.path}: not every node's agent has written "
                                    "its plan-<node>.json yet")
        return plan

    def full_record(self) -> RunRecord:
        """The run record; for a run directory from before it, what its cluster plan
        implies."""
        record = self._record or self._run.read_record()
        return record if record is not None else cluster_record(
            self._run.read_topology(), self._run.read_cluster_plan(), self.kind,
            str(self._run.path.resolve()))

    def doctor_target(self) -> DoctorTarget:
        """etcd and NATS read at the head node's address, the plan from what the agents
        resolved; the pids are the nodes' own, not this machine's."""
        from ..doctor_target import doctor_target

        return doctor_target(self._run, self.full_record(), self.resolved_plan(), {})

    def metrics_layout(self) -> GraphLayout:
        from .layout import layout_from_cluster_run

        return layout_from_cluster_run(self._run)

    def fault(self, request: FaultOrder, say: Callable[[str], None]) -> str | None:
        target = node_of(self._run.read_cluster_plan(), request.node, request.process)
        self._reach().inflict(target, request, say)
        return target.name


def cluster_record(topo: Topology, plan: ClusterPlan, kind: PlacementKind, run_dir: str, *,
                   job_id: str | None = None, started_at: float | None = None) -> RunRecord:
    """The record of a multi-node run of `plan` in `run_dir` (as this machine sees it)."""
    from ...launch.run_record import build_record

    return build_record(
        topo, placement=kind, run_dir=run_dir, frontend=plan.endpoint,
        frontend_tls=plan.endpoint_tls_with({"RUN_DIR": run_dir}),
        processes=[p.name for n in plan.nodes for p in n.processes],
        addresses=[n.address for n in plan.nodes], job_id=job_id, started_at=started_at)


def node_of(plan: ClusterPlan, node: str | None, process: str | None) -> NodeProcesses:
    """The node a fault is for: `node`, or the one `process` runs on."""
    names = ", ".join(n.name for n in plan.nodes)
    if node is None:
        for candidate in plan.nodes:
            if any(p.name == process for p in candidate.processes):
                return candidate
        everything = ", ".join(p.name for n in plan.nodes for p in n.processes)
        raise UserInputError(f"no process {process!r} in graph {plan.name}", key="--process",
                             fix=f"use one of {everything}")
    found = next((n for n in plan.nodes if n.name == node), None)
    if found is None:
        raise UserInputError(f"graph {plan.name} has no node {node!r}", key="--node",
                             fix=f"use one of {names}")
    if process is not None and not any(p.name == process for p in found.processes):
        here = ", ".join(p.name for p in found.processes) or "nothing"
        raise UserInputError(f"no process {process!r} on node {node} of {plan.name}",
                             key="--process", fix=f"node {node} runs {here}")
    return found
