"""The live view of a graph on this machine (placement local) that change/executor.py steps
through: its run directory's plan.json (what the supervisor reconciles to) and state.json
(what the supervisor made of it), plus the router's view from the frontend."""

from __future__ import annotations

from pathlib import Path

from ...change.executor import LiveLook, LiveState, ProcessLook
from ...coordination.probes import http_client, router_view
from ...launch.rundir import RunDir
from ...render.launch_plan import ProcessSpec, render_launch_plan
from ...render.node_layout import WorkerSlot
from ...topology import Topology


class LocalLive:
    def __init__(self, run: RunDir) -> None:
        self.run = run

    @property
    def run_dir(self) -> Path:
        return self.run.path

    def read(self) -> LiveState:
        plan = self.run.read_plan()
        return LiveState(topology=self.run.read_topology(), revision=plan.revision,
                         processes=list(plan.processes))

    def render(self, topo: Topology, slots: list[WorkerSlot]) -> list[ProcessSpec]:
        return render_launch_plan(topo, self.run.read_context(), slots).processes

    def write(self, processes: list[ProcessSpec], revision: int, topo: Topology) -> None:
        plan = self.run.read_plan()
        self.run.write_plan(plan.model_copy(update={
            "processes": processes, "revision": revision, "supervision": topo.supervision}))

    def write_topology(self, topo: Topology) -> None:
        self.run.write_topology(topo)

    def look(self) -> LiveLook:
        state = self.run.read_state()
        if state is None:
            return LiveLook(revisions=[])
        plan = self.run.read_plan()
        roles = {p.name: p.role for p in plan.processes}
        processes = {p.name: ProcessLook(state=p.state, ready=p.ready, role=roles.get(p.name))
                     for p in state.processes}
        with http_client(tls=plan.endpoint_tls) as client:
            view = router_view(client, plan)
        return LiveLook(revisions=[state.revision], processes=processes, routed=view.seen)
