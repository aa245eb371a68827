"""The graph handle of placement slurm: one sbatch job runs the graph; the run directory
(shared storage at Slurm sites) and squeue/scancel are how it is found and watched. The
submitting, following and cancelling live in slurm_job.py, slurm_follow.py and
slurm_jobs.py; this module puts them behind `GraphHandle`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from ..errors import RunError
from .cluster_view import agent_log_names
from .observed import (
    ObservedGraph,
    RegistrationsView,
    StartOptions,
    StartReport,
    StopReport,
)
from .run_handle import RunHandle
from .rundir import RunDir
from .slurm_jobs import SlurmJob, cancel, job_state

if TYPE_CHECKING:
    from ..topology import Topology

JOB_POLL_S = 1.0


class SlurmHandle(RunHandle):
    def __init__(self, run: RunDir, topo: Topology | None = None, *,
                 job: SlurmJob | None = None) -> None:
        super().__init__(run, topo)
        self._job = job
        self._timeout_s: float | None = None

    def _submitted(self) -> SlurmJob:
        if self._job is None:
            raise RunError(f"{self.name}: no Slurm job was submitted")
        return self._job

    def start(self, options: StartOptions) -> StartReport:
        from ..startup_budget import readiness_timeout_s
        from .slurm_job import submit

        topo = self._topology_to("submit", "dis-serve up")
        self._job = submit(topo, self._run.path.parent.parent)
        self._timeout_s = readiness_timeout_s(topo, options.ready_timeout_s)
        return StartReport(notes=[f"submitted Slurm job {self._job.job_id} "
                                  f"({self._run.path})"])

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        from .slurm_follow import follow_until_ready

        job = self._submitted()
        if self._timeout_s is None:
            return self.status()
        return follow_until_ready(self._run, job, self._timeout_s, on_update=on_update)

    def watch(self, on_change: Callable[[ObservedGraph], None]) -> ObservedGraph:
        job = self._submitted()
        shown = self.status().phase
        while job_state(job.job_id).active:
            time.sleep(JOB_POLL_S)
            observed = self.status()
            if observed.phase is not shown and observed.phase.serving:
                shown = observed.phase
                on_change(observed)
        return self.status()

    def status(self) -> ObservedGraph:
        from .slurm_follow import observe

        return observe(self._run, self._submitted())

    def registrations(self) -> RegistrationsView:
        from .run_lookup import read_registrations

        return read_registrations(self._run)

    def process_names(self) -> list[str]:
        job = self._submitted()
        return [*job.processes, *agent_log_names(self._run), f"slurm-{job.job_id}"]

    def tail(self, process: str, lines: int) -> list[str]:
        return self._run.tail(process, lines)

    def follow(self, processes: list[str]) -> Iterator[tuple[str, str]]:
        return self._run.follow(processes)

    def stop(self) -> StopReport:
        job = self._submitted()
        if not job_state(job.job_id).active:
            return StopReport(name=job.name, was_running=False, lines=[
                f"{job.name} is not running (Slurm job {job.job_id} has ended)"])
        took = cancel(job, agents_done=self._ask_agents_to_stop())
        return StopReport(name=job.name, was_running=True, lines=[
            f"stopped {job.name} (scancel {job.job_id}; left the queue after {took:.1f} s)",
            *self._cleared()])

    def _ask_agents_to_stop(self) -> Callable[[], bool]:
        """Ask every agent to stop its node in order (as the batch script's trap does: its
        shell may have been lost with its node), and say when none runs any more."""
        from .agent_contact import request_stop
        from .cluster_view import agents_running, look_at_nodes

        plan = self._run.read_cluster_plan()
        request_stop(self._run.path)
        return lambda: not agents_running(look_at_nodes(self._run, plan))

    def _cleared(self) -> list[str]:
        """The nodes' data directories on this machine that no agent owns any more (an
        agent killed outright; node_data.py)."""
        import os

        from .node_data import clear_data, data_dir_nodes

        paths = clear_data(self._run.read_topology(), os.environ | {
            "SLURM_JOB_ID": self._submitted().job_id}, data_dir_nodes(self._run))
        return [f"removed {path}, which no agent owned any more" for path in paths]

