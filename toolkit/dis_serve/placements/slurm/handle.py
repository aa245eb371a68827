"""The graph handle of placement slurm: one sbatch job runs the graph; the run directory
(shared storage at Slurm sites) and squeue/scancel are how it is found and watched, and a
step of the job's own on a node is how a fault reaches it. The submitting, following and
cancelling live in submit.py, follow.py and queue.py; this module puts them behind
`GraphHandle`."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ...errors import PreflightError, RunError
from ...launch.rundir import RunDir
from ...topology import PlacementKind
from ..cluster.handle import ClusterHandle
from ..cluster.view import agent_log_names
from ..reports import ObservedGraph, StartOptions, StartReport, StopReport
from .queue import SlurmJob, cancel, job_of, job_state
from .sbatch import node_name_var

if TYPE_CHECKING:
    from ...launch.faults import FaultOrder
    from ...launch.run_record import RunRecord
    from ...render.cluster_plan import ClusterPlan, NodeProcesses
    from ...render.node_layout import WorkerSlot
    from ...topology import Topology
    from ..cluster.live import PlanRenderer

JOB_POLL_S = 1.0
FAULT_MARGIN_S = 60.0


class JobSteps:
    """How the client reaches a Slurm node's agent: `srun --jobid=J --overlap
    --nodelist=HOST -N1 -n1 python -m dis_serve inflict ...`, a step of the graph's own job
    on that node (Slurm's host name of each node is in the job's `addresses`)."""

    def __init__(self, run: RunDir, job: SlurmJob) -> None:
        self._run, self._job = run, job

    def inflict(self, node: NodeProcesses, request: FaultOrder,
                say: Callable[[str], None]) -> None:
        run, job = self._run, self._job
        host = run.read_addresses().get(node_name_var(node.index))
        if host is None:
            raise RunError(f"{run.name}: the job has not written its addresses yet (is Slurm "
                           f"job {job.job_id} running?)")
        argv = ["srun", f"--jobid={job.job_id}", "--overlap", f"--nodelist={host}", "-N1",
                "-n1", f"--job-name=fault-{node.name}", sys.executable, "-m", "dis_serve",
                "inflict", str(run.path), "--node", node.name, *request.inflict_args()]
        out = subprocess.run(argv, capture_output=True, text=True, check=False,
                             timeout=(request.duration_s or 0.0) + FAULT_MARGIN_S)
        for line in out.stdout.splitlines():
            say(f"[{node.name}] {line}")
        if out.returncode != 0:
            raise RunError(f"{shlex.join(argv[:6])} ... failed ({out.returncode}): "
                           f"{out.stderr.strip()[-400:]}")


class SlurmHandle(ClusterHandle):
    kind = PlacementKind.SLURM

    def _plan_renderer(self) -> PlanRenderer:
        """The plan `up` submitted, with other worker slots: rendered as then, from the run
        directory's render-context.json."""
        from .sbatch import render_slurm_plan

        ctx = self._run.read_context()

        def render(topo: Topology, slots: list[WorkerSlot]) -> ClusterPlan:
            return render_slurm_plan(topo, run_dir=str(ctx.run_dir), python=ctx.python,
                                     etcd_bin=ctx.etcd_bin, nats_bin=ctx.nats_bin,
                                     model_path=ctx.model_path, slots=slots)
        return render

    def __init__(self, run: RunDir, topo: Topology | None = None, *,
                 record: RunRecord | None = None, job: SlurmJob | None = None) -> None:
        super().__init__(run, topo, record)
        self._job = job if job is not None else (job_of(record) if record else None)
        self._timeout_s: float | None = None

    def _submitted(self) -> SlurmJob:
        if self._job is None:
            raise RunError(f"{self.name}: no Slurm job was submitted")
        return self._job

    def _reach(self) -> JobSteps:
        return JobSteps(self._run, self._submitted())

    def fault(self, request: FaultOrder, say: Callable[[str], None]) -> str | None:
        # A job that left the queue (or a cluster whose controller is gone, so squeue cannot
        # answer) has no node to run a step on: one line saying so, not srun's errors.
        job = self._submitted()
        if not job_state(job.job_id).active:
            raise RunError(f"{self.name} is not running: Slurm job {job.job_id} is not in "
                           "the queue (or its cluster's controller does not answer); nothing "
                           "to fault")
        return super().fault(request, say)

    def start(self, options: StartOptions) -> StartReport:
        from ...launch.startup_budget import readiness_timeout_s
        from .submit import submit

        topo = self._topology_to("submit", "dis-serve up")
        self._job = submit(topo, self._run.path.parent.parent)
        self._record = self._run.read_record()
        self._timeout_s = readiness_timeout_s(topo, options.ready_timeout_s)
        return StartReport(notes=[f"submitted Slurm job {self._job.job_id} "
                                  f"({self._run.path})"])

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        from .follow import follow_until_ready

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
        from .follow import observe

        return observe(self._run, self._submitted())

    def is_active(self) -> bool:
        """Its job is still in the queue."""
        try:
            return job_state(self._submitted().job_id).active
        except PreflightError:  # no squeue here: nothing can tell
            return False

    def process_names(self) -> list[str]:
        job = self._submitted()
        return [*job.processes, *agent_log_names(self._run), f"slurm-{job.job_id}"]

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
        from ...launch.agent_contact import request_stop
        from ..cluster.view import agents_running, look_at_nodes

        plan = self._run.read_cluster_plan()
        request_stop(self._run.path)
        return lambda: not agents_running(look_at_nodes(self._run, plan))

    def _cleared(self) -> list[str]:
        """The nodes' data directories on this machine that no agent owns any more (an
        agent killed outright; node_data.py)."""
        import os

        from ...launch.node_data import SLURM_JOB_ENV, clear_data, data_dir_nodes

        paths = clear_data(self._run.read_topology(), os.environ | {
            SLURM_JOB_ENV: self._submitted().job_id}, data_dir_nodes(self._run))
        return [f"removed {path}, which no agent owned any more" for path in paths]
