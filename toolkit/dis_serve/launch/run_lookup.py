"""Find a graph from another shell through its run directory; claim one before `up`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PreflightError, UserInputError
from ..render.cluster_plan import CLUSTER_PLAN_FILE
from .cluster_view import agents_running, is_hosts_run, look_at_nodes
from .orphans import Leftover, kill_leftovers, leftovers
from .process import same_process
from .run_lock import lock_holder
from .rundir import RunDir, default_root, list_runs
from .slurm_jobs import job_state, read_job
from .status import GraphStatus

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorTarget
    from ..render.launch_plan import LaunchPlan
    from ..topology import ProcessKind
    from .observed import RegistrationsView


def supervisor_alive(status: GraphStatus) -> bool:
    return same_process(status.supervisor_pid, status.supervisor_create_time)


def is_active(run: RunDir) -> bool:
    """A live supervisor owns the graph, or its record says it runs (a supervisor killed
    before it could say otherwise), or processes it started are still running; for a Slurm
    graph: its job is still in the queue."""
    job = read_job(run)
    if job is not None:
        try:
            return job_state(job.job_id).active
        except PreflightError:  # no squeue here: nothing can tell
            return False
    if is_hosts_run(run):
        return agents_running(look_at_nodes(run, run.read_cluster_plan()))
    if lock_holder(run) is not None:
        return True  # starting (no state written yet) or running
    status = run.read_state()
    if status is None:
        return False
    return supervisor_alive(status) or not status.phase.finished or bool(leftovers(status))


def active_runs(root: Path | None = None) -> list[RunDir]:
    return [run for run in list_runs(root) if is_active(run)]


def find_run(name: str | None, root: Path | None = None, *, active_only: bool = True) -> RunDir:
    """The run named `name`; else the only active one; else (unless `active_only`) the only
    one there is."""
    where = root or default_root()
    if name is not None:
        run = RunDir.for_graph(name, root)
        # A directory without a record is a graph whose `up` stopped before it started
        # anything (its handle says so), not an unknown name.
        if not run.exists() and lock_holder(run) is None and not run.path.is_dir():
            known = ", ".join(r.name for r in list_runs(root)) or "none"
            raise UserInputError(f"no graph named {name!r} under {where} (graphs: {known})",
                                 fix="pass one of those names, or run from the directory "
                                     "you started it in (or set DIS_SERVE_HOME)")
        return run
    candidates = active_runs(root)
    if not candidates and not active_only:
        candidates = list_runs(root)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UserInputError(f"no graph is running under {where}",
                             fix="start one with `dis-serve up`, or set DIS_SERVE_HOME to "
                                 "where it was started")
    names = ", ".join(r.name for r in candidates)
    raise UserInputError(f"several graphs are running ({names})", fix="name one")


def claim(run: RunDir) -> list[Leftover]:
    """Before `up`: refuse a graph that is running; stop what a dead supervisor left behind."""
    status = run.read_state()
    if status is None:
        return []
    if supervisor_alive(status) and not status.phase.finished:
        raise PreflightError(
            f"graph {status.name!r} is already running (supervisor pid {status.supervisor_pid}, "
            f"{status.endpoint}); stop it with `dis-serve down {status.name}` or give this "
            "graph another name")
    return kill_leftovers(status)


def doctor_target(run: RunDir) -> DoctorTarget:
    """Our graph, from its run directory, as the doctor reads it: URLs, metrics ports,
    expectations, and which pid is which process. A multi-node graph's etcd and NATS are
    read at the head node's address, its plan from what the agents resolved; OSError while
    the run directory lacks what it needs."""
    from ..coordination.doctor import DoctorTarget, expectations
    from ..render.metrics_endpoints import FRONTEND, graph_endpoints
    from ..render.tls_planes import graph_pki_paths
    from ..topology import EtcdMode, NatsMode, ProcessKind
    from .secrets import graph_nats_token

    topo = run.read_topology()
    plan, pids = _plan_and_pids(run)
    endpoints = graph_endpoints(plan, plan.endpoint)
    nats = topo.coordination.nats
    etcd_url = topo.coordination.etcd.client_url
    nats_url = nats.client_url if nats.mode is not NatsMode.OFF else None
    # The planes the graph runs itself are read with its own certificates (and token).
    tls = graph_pki_paths(topo.security, run.path.resolve())
    if topo.placement.kind.multi_node:
        etcd_url = _at_process(etcd_url, plan, ProcessKind.ETCD)
        nats_url = nats_url and _at_process(nats_url, plan, ProcessKind.NATS)
        # The cluster plan says whether its planes speak TLS (its etcd's own flags).
        if not any("--cert-file" in p.argv for p in plan.processes
                   if p.kind is ProcessKind.ETCD):
            tls = None
    return DoctorTarget(
        namespace=topo.namespace, etcd_url=etcd_url, nats_url=nats_url,
        nats_token=graph_nats_token(topo, run.path.resolve())
        if nats.mode is not NatsMode.OFF else None,
        etcd_tls=tls if topo.coordination.etcd.mode is EtcdMode.EMBEDDED else None,
        nats_tls=tls if nats.mode is NatsMode.EMBEDDED else None,
        frontend_metrics=next(e.url for e in endpoints if e.pool == FRONTEND),
        frontend_tls=plan.endpoint_tls,
        worker_metrics=[e.url for e in endpoints if e.pool != FRONTEND],
        expected=expectations(topo), graph=topo.name, plan=plan, pids=pids)


def resolved_plan(run: RunDir) -> LaunchPlan:
    """The plan the graph runs, every address resolved (local: plan.json; Slurm and hosts:
    what the agents wrote); OSError while the run directory lacks it."""
    return _plan_and_pids(run)[0]


def _plan_and_pids(run: RunDir) -> tuple[LaunchPlan, dict[int, str]]:
    """The resolved plan, and pid -> process name where the pids are this machine's (a
    local graph; a multi-node graph's pids are its nodes')."""
    from .cluster_view import node_plans

    if not run.plan_file.is_file() and (run.path / CLUSTER_PLAN_FILE).is_file():
        plan = node_plans(run, run.read_cluster_plan())
        if plan is None:
            raise FileNotFoundError(f"{run.path}: not every node's agent has written its "
                                    "plan-<node>.json yet")
        return plan, {}
    state = run.read_state()
    return run.read_plan(), ({p.pid: p.name for p in state.processes if p.pid} if state
                             else {})


def _at_process(url: str, plan: LaunchPlan, kind: ProcessKind) -> str:
    """`url` pointed at where the plan's embedded `kind` process listens (an external
    server's URL is left as it is)."""
    from urllib.parse import urlsplit

    spec = next((p for p in plan.processes if p.kind is kind), None)
    if spec is None:
        return url
    parts = urlsplit(url)
    return parts._replace(netloc=f"{spec.probed_host}:{spec.ports['client']}").geturl()


def read_registrations(run: RunDir) -> RegistrationsView:
    """What the router sees of a serving graph: the doctor's report without NATS (every
    placement's handle answers `registrations()` with it)."""
    from dataclasses import replace

    from ..coordination.doctor import run_doctor
    from .observed import RegistrationsView

    try:
        target = doctor_target(run)
    except OSError as exc:  # the run directory's inputs were removed while it runs
        return RegistrationsView(unavailable=str(exc))
    return RegistrationsView(report=run_doctor(replace(target, nats_url=None)))
