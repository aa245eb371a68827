"""Follow a submitted Slurm graph to ready, and look at it later: squeue for the job, and
what every node's agent wrote in the run directory (cluster/view.py) for its processes."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ...coordination.probes import PROBE_TIMEOUT_S
from ...errors import RunError
from ...launch.rundir import RunDir
from ...launch.status import GraphPhase
from ...security.http_client import direct_client
from ...topology import PlacementKind
from ..cluster.view import endpoint_tls_here, has_served, observe_cluster
from ..reports import ObservedGraph
from .queue import JobState, SlurmJob, cancel, job_state

LOG_LINES_ON_FAILURE = 15


def observe(run: RunDir, job: SlurmJob, client=None) -> ObservedGraph:  # httpx.Client
    """One look: the job's state, every node's agent state, the router once it served."""
    state = job_state(job.job_id)
    where = f"Slurm job {job.job_id}, {state.state}" + (f" on {state.nodes}" if state.nodes
                                                         else "")
    observed = observe_cluster(run, run.read_cluster_plan(), placement=PlacementKind.SLURM,
                               running=state.state == "RUNNING", supervisor=where,
                               supervisor_alive=state.active, client=client)
    if state.active and observed.phase is GraphPhase.STOPPED:
        observed = _waiting(run, job, state, observed)
    return observed.model_copy(update={"model_name": job.model_name,
                                       "queued_s": state.queued_s})


def _waiting(run: RunDir, job: SlurmJob, state: JobState,
             observed: ObservedGraph) -> ObservedGraph:
    """A job that is not running: ending (its steps still stopping), queued (starting), or
    pending when it cannot start: requeued after it ran (a node failed and the job was
    allowed a requeue), or held back for a reason the scheduler will not lift itself."""
    if state.state == "COMPLETING":
        return observed.model_copy(update={"phase": GraphPhase.STOPPING})
    why = f"pending ({state.reason or 'no reason given'})"
    if state.state == "PENDING" and has_served(run):
        problem = (f"Slurm requeued job {job.job_id} after it ran, and it is {why}: nothing "
                   "serves until it runs again")
    elif state.cannot_start:
        problem = f"Slurm job {job.job_id} cannot start: it is {why}"
    else:
        return observed.model_copy(update={"phase": GraphPhase.STARTING})
    return observed.model_copy(update={"phase": GraphPhase.FAILED, "problems": [problem],
                                       "error": problem})


def follow_until_ready(run: RunDir, job: SlurmJob, timeout_s: float,
                       on_update: Callable[[ObservedGraph], None] | None = None,
                       poll_s: float = 0.1) -> ObservedGraph:
    """Poll until the graph is ready. RunError (the job cancelled) if the job ends first or
    is not ready by the deadline."""
    deadline = time.monotonic() + timeout_s
    tls = endpoint_tls_here(run, run.read_cluster_plan())
    with direct_client(PROBE_TIMEOUT_S, 0.5, tls=tls) as client:
        while True:
            status = observe(run, job, client)
            if on_update is not None:
                on_update(status)
            if status.phase is GraphPhase.READY:
                return status.model_copy(
                    update={"ready_after_s": time.time() - job.submitted_at})
            if not status.supervisor_alive:
                raise RunError(f"Slurm job {job.job_id} of {job.name} ended before it was "
                               f"ready; last lines of its log:\n{_job_log_tail(run, job)}")
            if status.phase is GraphPhase.FAILED:
                cancel(job)
                raise RunError(f"{job.name}: {'; '.join(status.problems)}; cancelled Slurm "
                               f"job {job.job_id}; agents' logs in {run.logs}")
            if time.monotonic() > deadline:
                state = job_state(job.job_id).state
                cancel(job)
                pending = [p.name for p in status.processes if not p.ready]
                what = (f"not ready: {', '.join(pending) or status.router}"
                        if state == "RUNNING" else f"the job is {state}")
                why = "".join(f"; {problem}" for problem in status.problems)
                raise RunError(f"{job.name}: not ready after {timeout_s:g} s ({what}){why}; "
                               f"cancelled Slurm job {job.job_id}; logs in {run.logs}")
            time.sleep(poll_s)


def _job_log_tail(run: RunDir, job: SlurmJob) -> str:
    path = Path(run.logs) / f"slurm-{job.job_id}.log"
    try:
        lines = path.read_text(errors="replace").splitlines()[-LOG_LINES_ON_FAILURE:]
    except OSError:
        return f"  ({path} is missing)"
    return "\n".join("  " + line for line in lines) or "  (empty log)"
