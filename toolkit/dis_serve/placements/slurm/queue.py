"""A Slurm graph's job as its run record says it, and what squeue and scancel say about it.

`up` writes the run record (launch/run_record.py) with the job id when sbatch accepts the
job; `status`, `logs`, `fault` and `down` (and the check that refuses a second `up`) find the
job through it. A run directory of an earlier dis-serve kept the job in `slurm-job.json`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from ...errors import PreflightError, RunError
from ...launch.run_record import RunRecord
from ...launch.rundir import RunDir

SLURM_TIMEOUT_S = 30
# How long `down` leaves a job whose agents have all stopped to end by itself.
AFTER_AGENTS_S = 2.0
# squeue's reasons (slurm.h's job_state_reason strings) for a pending job that waits on
# something other than its turn: an administrator, a node that is down or drained, a
# partition that is down or too small, a dependency that can never be met.
NEVER_STARTS = frozenset({
    "JobHeldAdmin", "JobHeldUser", "ReqNodeNotAvail", "NodeDown", "PartitionDown",
    "PartitionInactive", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
    "DependencyNeverSatisfied", "InvalidAccount", "InvalidQOS", "launch failed requeued held"})


class SlurmJob(BaseModel):
    """What `up` recorded about the job it submitted (spec side; squeue says the rest): the
    run record's Slurm part (earlier versions wrote it on its own)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    job_id: str
    run_dir: str
    model_name: str
    submitted_at: float = Field(description="Unix time sbatch returned.")
    processes: list[str] = Field(description="Process names, in start order.")


class JobState(BaseModel):
    """One look at the job through squeue (frozen observation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    state: str = Field(description="squeue's state (PENDING, RUNNING...), or GONE once the "
                                   "job has left the queue.")
    submit_time: datetime | None = None
    start_time: datetime | None = None
    nodes: str = ""
    reason: str = Field(default="", description="squeue's reason a pending job waits (%r).")

    @property
    def cannot_start(self) -> bool:
        """Pending for a reason the scheduler will not lift by itself soon: held, a node it
        needs down or drained, a partition that cannot run it."""
        return self.state == "PENDING" and self.reason.split(",")[0].strip() in NEVER_STARTS

    @property
    def active(self) -> bool:
        return self.state in ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED")

    @property
    def queued_s(self) -> float | None:
        """The scheduler's own latency: submit to start, in Slurm's whole seconds."""
        if self.submit_time is None or self.start_time is None or self.state == "PENDING":
            return None
        return (self.start_time - self.submit_time).total_seconds()


def slurm_command(*argv: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which(argv[0])
    if binary is None:
        raise PreflightError(f"{argv[0]} not found on PATH: placement slurm needs Slurm's "
                             "client commands (run where you call sbatch, or install slurm-wlm)")
    return subprocess.run([binary, *argv[1:]], capture_output=True, text=True,
                          timeout=SLURM_TIMEOUT_S, check=False)


def job_state(job_id: str) -> JobState:
    out = slurm_command("squeue", "-h", "-j", job_id, "-o", "%T|%V|%S|%N|%r")
    line = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    if out.returncode != 0 or not line:
        return JobState(state="GONE")
    state, submit, start, nodes, reason = [*line.split("|"), "", "", "", ""][:5]
    return JobState(state=state, submit_time=_time(submit), start_time=_time(start),
                    nodes=nodes, reason=reason.strip())


def _time(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text)
    except ValueError:  # N/A, Unknown
        return None


def job_of(record: RunRecord) -> SlurmJob | None:
    if record.job_id is None:
        return None
    return SlurmJob(name=record.name, job_id=record.job_id, run_dir=record.run_dir,
                    model_name=record.model_name, submitted_at=record.started_at,
                    processes=record.processes)


def read_job(run: RunDir) -> SlurmJob | None:
    """The job the run record names; in a run directory from before the record, the one
    `slurm-job.json` names."""
    record = run.read_record()
    if record is not None:
        return job_of(record)
    try:
        return SlurmJob.model_validate_json(run.slurm_job_file.read_text())
    except (OSError, ValueError):
        return None



def cancel(job: SlurmJob, timeout_s: float = 60.0, grace_s: float = 20.0,
           agents_done: Callable[[], bool] | None = None) -> float:
    """Stop the job in order and wait until it has left the queue; seconds that took.

    SIGTERM to the batch script only (its trap stops the frontend and workers, then NATS and
    etcd, and the job ends); a plain scancel, which signals every step at once, if the job
    is still there after `grace_s`, or as soon as `agents_done` says every agent has stopped
    (the caller asked them itself: a job whose batch script was lost with its node stays in
    the queue with nothing left to run)."""
    start = time.monotonic()
    slurm_command("scancel", "--batch", "--signal=TERM", job.job_id)
    while job_state(job.job_id).active:
        elapsed = time.monotonic() - start
        if agents_done is not None and agents_done():
            # A batch script that lives ends the job itself within a moment (its exit trap
            # clears data first); one lost with its node never will.
            grace_s, agents_done = min(grace_s, elapsed + AFTER_AGENTS_S), None
        if elapsed > grace_s:
            out = slurm_command("scancel", job.job_id)
            if out.returncode != 0 and job_state(job.job_id).active:
                raise RunError(f"scancel {job.job_id} failed: {out.stderr.strip()}")
            grace_s = timeout_s
        if elapsed > timeout_s:
            raise RunError(f"Slurm job {job.job_id} still in the queue {timeout_s:g} s after "
                           "scancel; see squeue")
        time.sleep(0.1)
    return time.monotonic() - start
