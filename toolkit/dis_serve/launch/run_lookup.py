"""Find a graph from another shell through its run directory; claim one before `up`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import PreflightError, UserInputError
from .orphans import Leftover, kill_leftovers, leftovers
from .process import same_process
from .run_lock import lock_holder
from .rundir import RunDir, default_root, list_runs
from .slurm_jobs import job_state, read_job
from .status import GraphStatus

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorTarget


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
        if not run.exists() and lock_holder(run) is None:
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
    expectations, and which pid is which process."""
    from ..coordination.doctor import DoctorTarget, expectations
    from ..render.metrics_endpoints import FRONTEND, graph_endpoints
    from ..render.tls_planes import graph_pki_paths
    from ..topology import EtcdMode, NatsMode
    from .secrets import graph_nats_token

    topo, plan, state = run.read_topology(), run.read_plan(), run.read_state()
    endpoints = graph_endpoints(plan, plan.endpoint)
    nats = topo.coordination.nats
    # The planes the graph runs itself are read with its own certificates (and token).
    tls = graph_pki_paths(topo.security, run.path.resolve())
    return DoctorTarget(
        namespace=topo.namespace, etcd_url=topo.coordination.etcd.client_url,
        nats_url=nats.client_url if nats.mode is not NatsMode.OFF else None,
        nats_token=graph_nats_token(topo, run.path.resolve())
        if nats.mode is not NatsMode.OFF else None,
        etcd_tls=tls if topo.coordination.etcd.mode is EtcdMode.EMBEDDED else None,
        nats_tls=tls if nats.mode is NatsMode.EMBEDDED else None,
        frontend_metrics=next(e.url for e in endpoints if e.pool == FRONTEND),
        frontend_tls=plan.endpoint_tls,
        worker_metrics=[e.url for e in endpoints if e.pool != FRONTEND],
        expected=expectations(topo), graph=topo.name, plan=plan,
        pids={p.pid: p.name for p in state.processes if p.pid} if state else {})
