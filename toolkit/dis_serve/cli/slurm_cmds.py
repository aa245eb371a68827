"""`up`, `status`, `logs`, `down` for a graph with placement slurm (launch_cmds hands over).

Only parsing and printing: submitting, following and cancelling live in launch/slurm_*.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from ..launch.rundir import RunDir
    from ..launch.slurm_follow import SlurmGraphStatus
    from ..launch.slurm_record import SlurmJob
    from ..topology import Topology

console = Console(highlight=False, soft_wrap=True)


def slurm_table(status: SlurmGraphStatus) -> Table:
    job = status.job
    title = f"{status.name}: {status.phase.value} (Slurm job {status.job_id}, {job.state}"
    title += f" on {job.nodes})" if job.nodes else ")"
    table = Table(title=title, title_justify="left")
    for column in ("process", "node", "ready"):
        table.add_column(column)
    for proc in status.processes:
        table.add_row(proc.name, str(proc.node), "yes" if proc.ready else "no")
    return table


def up(topo: Topology, timeout: float | None, detach: bool) -> None:
    """Submit, follow to ready with a live table (within `timeout`, default: the workers'
    startup budget); then return (--detach) or follow the job until it ends (Ctrl-C cancels
    it)."""
    from rich.live import Live

    from ..launch.rundir import RunDir
    from ..launch.slurm_follow import follow_until_ready
    from ..launch.slurm_job import submit
    from ..launch.slurm_record import cancel
    from ..startup_budget import readiness_timeout_s

    job = submit(topo)
    run = RunDir.for_graph(topo.name)
    console.print(f"submitted Slurm job {job.job_id} ({run.path})", markup=False)
    try:
        with Live(console=console, refresh_per_second=8) as live:
            status = follow_until_ready(run, job, readiness_timeout_s(topo, timeout),
                                        on_update=lambda s: live.update(slurm_table(s)))
        if not console.is_terminal:
            console.line()
        queued = status.job.queued_s
        console.print(f"ready in {status.ready_after_s:.1f} s from sbatch"
                      + (f" (scheduler: {queued:.0f} s queued)" if queued is not None else "")
                      + f": {status.endpoint}  (model {status.model_name})", markup=False)
        if detach:
            console.print(f"next: dis-serve status {topo.name} | dis-serve logs frontend "
                          f"--name {topo.name} | dis-serve down {topo.name}", markup=False)
            return
        console.print("Ctrl-C cancels the job.", markup=False)
        _wait_job_end(job)
    except KeyboardInterrupt:
        console.print(f"cancelling Slurm job {job.job_id}...", markup=False)
        cancel(job)


def _wait_job_end(job: SlurmJob) -> None:
    import time

    from ..launch.slurm_record import job_state

    while job_state(job.job_id).active:
        time.sleep(1.0)
    console.print(f"Slurm job {job.job_id} ended", markup=False)


def status(run: RunDir, job: SlurmJob) -> None:
    from ..launch.slurm_follow import observe

    current = observe(run, job)
    console.print(slurm_table(current))
    if current.endpoint:
        console.print(f"serving {current.model_name} at {current.endpoint} (router: "
                      f"{current.router})", markup=False)


def down(run: RunDir, job: SlurmJob) -> None:
    from ..launch.slurm_record import cancel, job_state

    if not job_state(job.job_id).active:
        console.print(f"{job.name} is not running (Slurm job {job.job_id} has ended)",
                      markup=False)
        return
    took = cancel(job)
    console.print(f"stopped {job.name} (scancel {job.job_id}; left the queue after "
                  f"{took:.1f} s)", markup=False)
