"""Follow a submitted Slurm graph to ready, and look at it later: squeue for the job, the
run directory for the addresses the job found, the same probes as a local graph for each
process, and the frontend's router view for the workers it routes across."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import RunError
from ..http_client import direct_client
from ..probes import PROBE_TIMEOUT_S, process_ready, router_view
from ..render.cluster_plan import resolved_launch_plan
from .rundir import RunDir
from .slurm_jobs import JobState, SlurmJob, cancel, job_state
from .status import GraphPhase

LOG_LINES_ON_FAILURE = 15


class ProcessView(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    node: int
    ready: bool


class SlurmGraphStatus(BaseModel):
    """What one look at a Slurm graph found (frozen; the topology is the spec)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    job_id: str
    job: JobState
    phase: GraphPhase
    endpoint: str | None = Field(default=None, description="Set once the job wrote it.")
    model_name: str
    processes: list[ProcessView]
    router: str | None = Field(default=None, description="Workers seen/expected per type.")
    ready_after_s: float | None = Field(
        default=None, description="Seconds from sbatch to ready (scheduler included).")


def observe(run: RunDir, job: SlurmJob, client=None) -> SlurmGraphStatus:  # httpx.Client
    """One look: the job's state, and once its addresses are known, every process's probe."""
    state = job_state(job.job_id)
    plan = run.read_cluster_plan()
    views = [ProcessView(name=p.name, node=p.node, ready=False)
             for n in plan.nodes for p in n.processes]
    endpoint, router, complete = None, None, False
    addresses = run.read_addresses() if state.state == "RUNNING" else {}
    if addresses:
        launch = resolved_launch_plan(plan, addresses, run.path)
        own = client or direct_client(PROBE_TIMEOUT_S, 0.5)
        try:
            views = [ProcessView(name=p.name, node=p.node, ready=process_ready(own, p, launch))
                     for p in launch.processes]
            # Every probe passing is the job's own test before it writes ENDPOINT_FILE;
            # probing from here does not wait for the job's next poll.
            if all(v.ready for v in views):
                view = router_view(own, launch)
                endpoint, router, complete = launch.endpoint, view.describe(), view.complete
        finally:
            if client is None:
                own.close()
    phase = (GraphPhase.READY if complete else GraphPhase.STARTING) if state.active \
        else GraphPhase.STOPPED
    return SlurmGraphStatus(name=job.name, job_id=job.job_id, job=state, phase=phase,
                            endpoint=endpoint, model_name=job.model_name, processes=views,
                            router=router)


def follow_until_ready(run: RunDir, job: SlurmJob, timeout_s: float,
                       on_update: Callable[[SlurmGraphStatus], None] | None = None,
                       poll_s: float = 0.1) -> SlurmGraphStatus:
    """Poll until the graph is ready. RunError (the job cancelled) if the job ends first or
    is not ready by the deadline."""
    deadline = time.monotonic() + timeout_s
    with direct_client(PROBE_TIMEOUT_S, 0.5) as client:
        while True:
            status = observe(run, job, client)
            if on_update is not None:
                on_update(status)
            if status.phase is GraphPhase.READY:
                return status.model_copy(
                    update={"ready_after_s": time.time() - job.submitted_at})
            if status.phase.finished:
                raise RunError(f"Slurm job {job.job_id} of {job.name} ended before it was "
                               f"ready; last lines of its log:\n{_job_log_tail(run, job)}")
            if time.monotonic() > deadline:
                cancel(job)
                pending = [v.name for v in status.processes if not v.ready]
                what = (f"the job is {status.job.state}" if status.job.state != "RUNNING"
                        else f"not ready: {', '.join(pending) or status.router}")
                raise RunError(f"{job.name}: not ready after {timeout_s:g} s ({what}); "
                               f"cancelled Slurm job {job.job_id}; logs in {run.logs}")
            time.sleep(poll_s)


def _job_log_tail(run: RunDir, job: SlurmJob) -> str:
    path = Path(run.logs) / f"slurm-{job.job_id}.log"
    try:
        lines = path.read_text(errors="replace").splitlines()[-LOG_LINES_ON_FAILURE:]
    except OSError:
        return f"  ({path} is missing)"
    return "\n".join("  " + line for line in lines) or "  (empty log)"
