"""The graph handle of placement slurm: one sbatch job runs the graph; the run directory
(shared storage at Slurm sites) and squeue/scancel are how it is found and watched. The
submitting, following and cancelling live in slurm_job.py, slurm_follow.py and
slurm_jobs.py; this module puts them behind `GraphHandle`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import RunError
from ..topology import PlacementKind
from .observed import (
    ObservedGraph,
    ObservedProcess,
    RegistrationsView,
    StartOptions,
    StartReport,
    StopReport,
)
from .rundir import RunDir
from .slurm_jobs import SlurmJob, cancel, job_state
from .status import GraphPhase, ProcessState

if TYPE_CHECKING:
    from ..topology import Topology
    from .slurm_follow import SlurmGraphStatus

JOB_POLL_S = 1.0


class SlurmHandle:
    def __init__(self, run: RunDir, topo: Topology | None = None, *,
                 job: SlurmJob | None = None) -> None:
        self._run = run
        self._topo = topo
        self._job = job
        self._timeout_s: float | None = None

    @property
    def name(self) -> str:
        return self._run.name

    @property
    def run(self) -> RunDir:
        return self._run

    def _submitted(self) -> SlurmJob:
        if self._job is None:
            raise RunError(f"{self.name}: no Slurm job was submitted")
        return self._job

    def start(self, options: StartOptions) -> StartReport:
        from ..startup_budget import readiness_timeout_s
        from .slurm_job import submit

        if self._topo is None:
            raise RunError(f"{self.name}: a handle found through its run directory cannot "
                           "submit the graph; `dis-serve up` its topology")
        self._job = submit(self._topo, self._run.path.parent.parent)
        self._timeout_s = readiness_timeout_s(self._topo, options.ready_timeout_s)
        return StartReport(notes=[f"submitted Slurm job {self._job.job_id} "
                                  f"({self._run.path})"])

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        from .slurm_follow import follow_until_ready

        job = self._submitted()
        if self._timeout_s is None:
            return self.status()
        status = follow_until_ready(
            self._run, job, self._timeout_s,
            on_update=None if on_update is None else lambda s: on_update(_observed(s, self._run)))
        return _observed(status, self._run)

    def watch(self, on_change: Callable[[ObservedGraph], None]) -> ObservedGraph:
        job = self._submitted()
        while job_state(job.job_id).active:
            time.sleep(JOB_POLL_S)
        return self.status()

    def status(self) -> ObservedGraph:
        from .slurm_follow import observe

        return _observed(observe(self._run, self._submitted()), self._run)

    def registrations(self) -> RegistrationsView:
        # The router's line is in `status().router`; the registrations of a graph spread
        # over nodes come with the per-node agents (issue 18).
        return RegistrationsView()

    def process_names(self) -> list[str]:
        job = self._submitted()
        return [*job.processes, f"slurm-{job.job_id}"]

    def tail(self, process: str, lines: int) -> list[str]:
        return self._run.tail(process, lines)

    def follow(self, processes: list[str]) -> Iterator[tuple[str, str]]:
        return self._run.follow(processes)

    def stop(self) -> StopReport:
        job = self._submitted()
        if not job_state(job.job_id).active:
            return StopReport(name=job.name, was_running=False, lines=[
                f"{job.name} is not running (Slurm job {job.job_id} has ended)"])
        took = cancel(job)
        return StopReport(name=job.name, was_running=True, lines=[
            f"stopped {job.name} (scancel {job.job_id}; left the queue after {took:.1f} s)"])


def _observed(status: SlurmGraphStatus, run: RunDir) -> ObservedGraph:
    job = status.job
    where = f"Slurm job {status.job_id}, {job.state}" + (f" on {job.nodes}" if job.nodes
                                                          else "")
    processes = [ObservedProcess(name=p.name, node=str(p.node), ready=p.ready,
                                 state=_process_state(status.phase, p.ready))
                 for p in status.processes]
    return ObservedGraph(
        name=status.name, placement=PlacementKind.SLURM, phase=status.phase,
        run_dir=str(run.path), model_name=status.model_name, endpoint=status.endpoint,
        processes=processes, supervisor=where, supervisor_alive=job.active,
        ready_after_s=status.ready_after_s, queued_s=job.queued_s, router=status.router)


def _process_state(phase: GraphPhase, ready: bool) -> ProcessState:
    if phase.finished:
        return ProcessState.STOPPED
    return ProcessState.READY if ready else ProcessState.STARTING
