"""Find a graph from another shell through its run directory, and stop it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import PreflightError, RunError, UserInputError
from .orphans import Leftover, kill_leftovers, leftovers
from .process import same_process
from .rundir import RunDir, default_root, list_runs
from .slurm_record import job_state, read_job
from .status import GraphPhase, GraphStatus, ProcessState
from .stopping import stop_processes


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
        if not run.exists():
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


@dataclass(frozen=True)
class StopResult:
    name: str
    had_supervisor: bool
    stale: bool = False
    supervisor_exit_s: float | None = None
    leftovers: list[Leftover] = field(default_factory=list)
    shared_keys_deleted: int = 0
    shared_streams_deleted: list[str] = field(default_factory=list)


def stop_run(run: RunDir, timeout_s: float = 60.0) -> StopResult:
    """Ask the graph's supervisor to stop it (SIGTERM) and wait; clean up whatever remains
    (everything, when the supervisor is gone)."""
    status = run.read_state()
    if status is None:
        return StopResult(name=run.name, had_supervisor=False)
    waited = None
    alive = supervisor_alive(status)
    if alive:
        start = time.monotonic()
        # Not its group: a supervisor in the foreground shares the shell's. If it must be
        # killed, its children die with it (PR_SET_PDEATHSIG); the sweep below gets the rest.
        stop_processes([status.supervisor_pid], timeout_s, groups=False)
        waited = time.monotonic() - start
    found = kill_leftovers(status)
    stale = not alive and not status.phase.finished
    if stale:
        # Nobody else will: record that the graph is down, so `status` stops reporting a
        # dead supervisor's last view.
        run.write_state(mark_stopped(status))
    keys, streams = _clean_shared_planes(run)
    return StopResult(name=status.name, had_supervisor=alive, stale=stale,
                      supervisor_exit_s=waited, leftovers=found, shared_keys_deleted=keys,
                      shared_streams_deleted=streams)


def _clean_shared_planes(run: RunDir) -> tuple[int, list[str]]:
    """On an external etcd/NATS, what the stopped graph's namespace left there (keys of a
    worker that died before revoking its lease, JetStream streams)."""
    if not run.topology_file.exists():
        return 0, []
    topo = run.read_topology()
    if not topo.coordination.uses_external_planes:
        return 0, []
    from ..coordination.shared_planes import clean_shared

    try:
        result = clean_shared(topo)
    except Exception as exc:  # the shared server went away: nothing to clean, nothing to stop
        raise RunError(f"{topo.name} stopped, but its namespace {topo.namespace} could not be "
                       f"cleaned on the shared etcd/NATS ({type(exc).__name__}); run "
                       f"`dis-serve doctor --clean {topo.namespace}` when it answers") from None
    return (result.keys_deleted, result.streams_deleted) if result else (0, [])


def mark_stopped(status: GraphStatus) -> GraphStatus:
    processes = [p.model_copy(update={"state": ProcessState.STOPPED, "ready": False})
                 for p in status.processes]
    return status.model_copy(update={"phase": GraphPhase.STOPPED, "processes": processes})
