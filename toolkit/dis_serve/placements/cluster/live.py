"""The live view of a multi-node graph (hosts, Slurm) that change/executor.py steps through:
the run directory's cluster-plan.json, whose revision every node's agent reconciles its
share to (the run directory is shared storage, as status already needs), the agents'
state-<node>.json beside it, and the router's view from the head's frontend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...change.executor import LiveLook, LiveState, ProcessLook
from ...coordination.probes import http_client, router_view
from ...files.atomic_file import write_atomic
from ...launch.rundir import RunDir
from ...render.cluster_plan import ClusterPlan
from ...render.launch_plan import ProcessSpec
from ...render.node_layout import WorkerSlot
from ...render.run_layout import CLUSTER_PLAN_FILE
from ...topology import ProcessKind, Topology
from .view import node_plans, read_node_state

PlanRenderer = Callable[[Topology, list[WorkerSlot]], ClusterPlan]


class ClusterLive:
    """`render_plan`: the placement's cluster plan of a topology with these worker slots
    (Slurm's with its MPI launch, hosts' with the nodes' addresses)."""

    def __init__(self, run: RunDir, render_plan: PlanRenderer) -> None:
        self.run = run
        self.render_plan = render_plan

    @property
    def run_dir(self) -> Path:
        return self.run.path

    def read(self) -> LiveState:
        plan = self.run.read_cluster_plan()
        return LiveState(topology=self.run.read_topology(), revision=plan.revision,
                         processes=[p for node in plan.nodes for p in node.processes])

    def render(self, topo: Topology, slots: list[WorkerSlot]) -> list[ProcessSpec]:
        return [p for node in self.render_plan(topo, slots).nodes for p in node.processes]

    def write(self, processes: list[ProcessSpec], revision: int, topo: Topology) -> None:
        """Workers on their slot's node, every other process on the head, as rendered."""
        del topo  # each agent takes supervision from topology.json (agent.py)
        plan = self.run.read_cluster_plan()
        head = plan.head.index
        nodes = [node.model_copy(update={"processes": [
            p for p in processes
            if (p.node if p.kind is ProcessKind.WORKER else head) == node.index]})
            for node in plan.nodes]
        updated = plan.model_copy(update={"nodes": nodes, "revision": revision})
        write_atomic(self.run.path / CLUSTER_PLAN_FILE, updated.model_dump_json(indent=2),
                     0o600)

    def write_topology(self, topo: Topology) -> None:
        self.run.write_topology(topo)

    def look(self) -> LiveLook:
        plan = self.run.read_cluster_plan()
        roles = {p.name: p.role for node in plan.nodes for p in node.processes}
        revisions, processes = [], {}
        for node in plan.nodes:
            state = read_node_state(self.run, node.name)
            if state is None:
                revisions.append(-1)  # its agent has not written: the step is not taken
                continue
            revisions.append(state.revision)
            processes |= {p.name: ProcessLook(state=p.state, ready=p.ready,
                                              role=roles.get(p.name))
                          for p in state.processes}
        resolved = node_plans(self.run, plan)
        routed = {}
        if resolved is not None:
            with http_client(tls=resolved.endpoint_tls) as client:
                routed = router_view(client, resolved).seen
        return LiveLook(revisions=revisions, processes=processes, routed=routed)
