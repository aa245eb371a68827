"""`change.json` in the run directory: the last change of the running graph, as `status`,
`top` and `doctor` show it (what it is for, which step it is at, how it ended), and the
change lock that lets one change run at a time.

What runs is not here: it is the run directory's plan (`plan.json`, or `cluster-plan.json` of
a hosts or Slurm graph) at the revision the change wrote, which every supervisor and agent
reconciles its share toward, and which a restarted one starts from.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserInputError
from ..files.atomic_file import write_atomic
from ..render.run_layout import CHANGE_FILE, CHANGE_HISTORY, CHANGE_LOCK


class ChangeState(StrEnum):
    RUNNING = "running"
    DONE = "done"
    STOPPED = "stopped"  # a new worker was not ready in time: the rest kept serving

    @property
    def finished(self) -> bool:
        return self is not ChangeState.RUNNING


class ChangeStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    revision: int
    why: str
    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    started_at: float
    took_s: float | None = Field(default=None, description="Until the added served and the "
                                                            "removed were gone.")


class ChangeRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    source: str = Field(description="scale | apply | planner (decision N).")
    started_at: float
    target: dict[str, int] = Field(description="Workers per pool role when it is done.")
    state: ChangeState = ChangeState.RUNNING
    steps: list[ChangeStep] = Field(default_factory=list)
    message: str | None = Field(default=None, description="How it ended, or why it stopped.")
    finished_at: float | None = None

    def with_step(self, step: ChangeStep) -> ChangeRecord:
        return self.model_copy(update={"steps": [*self.steps, step]})

    def finish(self, state: ChangeState, message: str) -> ChangeRecord:
        return self.model_copy(update={"state": state, "message": message,
                                       "finished_at": time.time()})

    def describe(self) -> str:
        target = ", ".join(f"{role} {n}" for role, n in self.target.items())
        what = f"{self.source} to {target}"
        if self.state is ChangeState.RUNNING:
            if not self.steps:
                return f"changing ({what}): starting"
            step = self.steps[-1]
            waits = ([f"{', '.join(step.added)} (new) to serve"] if step.added else []) + (
                [f"{', '.join(step.removed)} to drain"] if step.removed else [])
            waiting = f"; waiting for {' and '.join(waits)}" if waits else ""
            return f"changing ({what}): revision {step.revision}, {step.why}{waiting}"
        return f"last change ({what}): {self.state.value}: {self.message}"


def read_change(run_dir: Path) -> ChangeRecord | None:
    try:
        return ChangeRecord.model_validate_json((run_dir / CHANGE_FILE).read_text())
    except (OSError, ValidationError, ValueError):
        return None


def describe_change(run_dir: Path) -> str | None:
    """The line `status` prints about the running or last change (None: never changed)."""
    record = read_change(run_dir)
    return None if record is None else record.describe()


def write_change(run_dir: Path, record: ChangeRecord) -> None:
    """The change as it stands; a finished one is added to the history too."""
    write_atomic(run_dir / CHANGE_FILE, record.model_dump_json(indent=2), 0o600)
    if record.state.finished:
        fd = os.open(run_dir / CHANGE_HISTORY, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a") as history:
            history.write(record.model_dump_json() + "\n")


def read_history(run_dir: Path) -> list[ChangeRecord]:
    """Every finished change of the run, oldest first."""
    try:
        lines = (run_dir / CHANGE_HISTORY).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            found.append(ChangeRecord.model_validate_json(line))
        except (ValidationError, ValueError):
            continue
    return found


@contextmanager
def change_lock(run_dir: Path, name: str, *, wait: bool = False) -> Iterator[None]:
    """One change at a time (`scale`, `apply` and the planner's scaler take it): a second is
    refused at once rather than interleaved, or (`wait`: the scaler) waits its turn."""
    fd = os.open(run_dir / CHANGE_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            current = read_change(run_dir)
            doing = f": {current.describe()}" if current else ""
            raise UserInputError(f"graph {name!r} is being changed already{doing}",
                                 fix="wait for it (`dis-serve status`) and try again") from None
        yield
    finally:
        os.close(fd)
