"""What `top` watches on a local graph: the launch plan's metrics ports on the frontend's
host, the supervisor's state for readiness and restarts, the topology's batch sizes."""

from __future__ import annotations

from ...launch.change_record import describe_change
from ...launch.rundir import RunDir
from ...observe.frame import GraphLayout, WorkerTarget
from ...topology import ProcessKind


def _host_of(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]


def local_layout(run: RunDir) -> GraphLayout:
    plan, topo, state = run.read_plan(), run.read_topology(), run.read_state()
    host = _host_of(state.endpoint if state else plan.endpoint)
    processes = {p.name: p for p in state.processes} if state else {}
    workers = []
    for spec in plan.workers:
        assert spec.role is not None
        observed = processes.get(spec.name)
        workers.append(WorkerTarget(
            name=spec.name, pool=spec.role,
            metrics_url=f"http://{host}:{spec.ports['system']}/metrics",
            ready=observed.ready if observed else None,
            restarts=observed.restarts if observed else None))
    endpoint = (state.endpoint if state else plan.endpoint).rstrip("/")
    frontend = next((processes.get(p.name) for p in plan.processes
                     if p.kind is ProcessKind.FRONTEND), None)
    return GraphLayout(name=run.name, frontend_metrics_url=f"{endpoint}/metrics",
                       pools=[role for role, _ in topo.active_pools()], workers=workers,
                       batch_capacity={role: pool.max_batch_size
                                       for role, pool in topo.active_pools()},
                       frontend_tls=plan.endpoint_tls,
                       frontend_ready=frontend.ready if frontend else None,
                       change=describe_change(run.path))
