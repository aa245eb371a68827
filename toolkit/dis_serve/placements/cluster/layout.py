"""What `top` watches on a graph spread over nodes (placements slurm and hosts), from the
files its agents write in the run directory (cluster/view.py reads them): each
node's resolved plan (`plan-<node>.json`) says where its workers serve `/metrics` (the
address the worker advertises and binds DYN_SYSTEM_HOST to), its state (`state-<node>.json`)
their readiness and restarts, its heartbeat whether the node is hung or gone; the head's
`endpoint` file where the frontend answers, and the cluster plan the client files of its
HTTPS frontend. Nothing here is guessed from the topology: a node whose agent has not
written its plan yet has workers without an address."""

from __future__ import annotations

from ...errors import RunError
from ...launch.change_record import describe_change
from ...launch.rundir import RunDir
from ...observe.frame import GraphLayout, NodeTarget, WorkerTarget
from ...render.cluster_plan import ClusterPlan
from ...render.launch_plan import LaunchPlan
from ...render.metrics_endpoints import worker_metrics_url
from ...security.pki_files import EndpointTls
from ...topology import ProcessKind, Topology
from .view import (
    NodeLook,
    endpoint_of,
    endpoint_tls_here,
    look_at_nodes,
    node_processes_observed,
    read_node_plan,
)


def _node_workers(look: NodeLook, resolved: LaunchPlan | None) -> list[WorkerTarget]:
    observed = {p.name: p for p in node_processes_observed(look, running=True,
                                                            starting_grace_s=None)}
    specs = {s.name: s for s in resolved.processes} if resolved is not None else {}
    workers = []
    for spec in look.node.processes:
        if spec.kind is not ProcessKind.WORKER or spec.role is None:
            continue
        found, seen = specs.get(spec.name), observed.get(spec.name)
        workers.append(WorkerTarget(
            name=spec.name, pool=spec.role, node=look.node.name,
            metrics_url=None if found is None else worker_metrics_url(found, found.probed_host),
            ready=seen.ready if seen is not None and look.state is not None else None,
            restarts=seen.restarts if seen is not None and look.state is not None else None))
    return workers


def cluster_layout(plan: ClusterPlan, topo: Topology, looks: list[NodeLook],
                   resolved: dict[str, LaunchPlan | None], endpoint: str,
                   tls: EndpointTls | None) -> GraphLayout:
    """The layout from one look at every node (pure): `resolved` is each node's plan as its
    agent wrote it (None: not yet), `endpoint` the frontend's base URL."""
    head = next(look for look in looks
                if any(p.kind is ProcessKind.FRONTEND for p in look.node.processes))
    head_state = {p.name: p for p in head.state.processes} if head.state else {}
    frontend = next(p.name for p in head.node.processes if p.kind is ProcessKind.FRONTEND)
    return GraphLayout(
        name=plan.name, frontend_metrics_url=f"{endpoint.rstrip('/')}/metrics",
        pools=[role for role, _ in topo.active_pools()],
        workers=[w for look in looks for w in _node_workers(look, resolved[look.node.name])],
        batch_capacity={role: pool.max_batch_size for role, pool in topo.active_pools()},
        frontend_tls=tls, frontend_node=head.node.name,
        frontend_ready=head_state[frontend].ready if frontend in head_state else None,
        nodes=[NodeTarget(name=look.node.name, started=look.started, gone=look.gone,
                          problem=look.problem()) for look in looks])


def layout_from_cluster_run(run: RunDir) -> GraphLayout:
    """The layout of a multi-node graph from its run directory as it is now; RunError
    while not even the head's agent has said where the frontend is."""
    plan = run.read_cluster_plan()
    looks = look_at_nodes(run, plan)
    resolved = {node.name: read_node_plan(run, node.name) for node in plan.nodes}
    # The endpoint file once the graph has served; before, the head's own resolved plan.
    head_plan = resolved[plan.head.name]
    endpoint = endpoint_of(run) or (head_plan.endpoint if head_plan is not None else None)
    if endpoint is None:
        raise RunError(f"{plan.name}: its head node ({plan.head.name}) has not resolved the "
                       "frontend's address yet; see `dis-serve status "
                       f"{plan.name}`")
    layout = cluster_layout(plan, run.read_topology(), looks, resolved, endpoint,
                          endpoint_tls_here(run, plan))
    return layout.model_copy(update={"change": describe_change(run.path)})
