"""What a graph handle reports (frozen observations) and takes (start options): shared by
every placement's handle (base.GraphHandle) and by whoever prints them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..launch.rundir import DEFAULT_KEEP_RUNS
from ..launch.status import GraphPhase, ProcessState
from ..security.pki_files import EndpointTls
from ..topology import PlacementKind

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorReport
    from ..launch.events import SupervisorEvent


class ObservedProcess(BaseModel):
    """One process as the last look found it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    node: str | None = Field(default=None, description="The node it runs on (multi-node "
                                                       "placements; None on this machine).")
    pid: int | None = None
    state: ProcessState
    ports: dict[str, int] = Field(default_factory=dict)
    restarts: int = 0
    ready: bool = False
    joining: bool = Field(default=False, description="Started by a change of the running "
                                                     "graph; not routed to yet.")
    why: str | None = Field(
        default=None, exclude_if=lambda why: why is None,
        description="Why it is not serving, when its node says (the node is lost: its agent "
                    "silent or dead, Slurm took the node out of the job).")


class StatusVerdict(IntEnum):
    """What `dis-serve status` exits with: scripts branch on it."""

    OK = 0          # ready, starting, or stopped cleanly
    FAILED = 1      # failed, or its supervisor is gone while the record says it runs
    DEGRADED = 3    # serving, with a process down, restarting or given up

    @property
    def exit_code(self) -> int:
        return int(self)


class ObservedGraph(BaseModel):
    """What one look at a graph found (frozen; the topology is the spec)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    placement: PlacementKind
    phase: GraphPhase
    run_dir: str
    model_name: str
    endpoint: str | None = Field(default=None, description="Set once it is known (a Slurm "
                                                           "job writes it when it is ready).")
    endpoint_tls: EndpointTls | None = Field(
        default=None, description="What a client of an https endpoint needs (paths).")
    processes: list[ObservedProcess]
    supervisor: str = Field(description="Who keeps it running, for people: 'supervisor pid "
                                        "123', 'Slurm job 45, RUNNING on n1'.")
    supervisor_alive: bool = Field(description="That supervisor (or job) still runs.")
    ready_after_s: float | None = Field(
        default=None, description="Seconds to ready: from the first spawn (local), from "
                                  "sbatch (Slurm, the scheduler's queueing included).")
    queued_s: float | None = Field(default=None,
                                   description="Seconds the scheduler queued the job.")
    router: str | None = Field(default=None, description="Workers seen/expected per type.")
    problems: list[str] = Field(default_factory=list,
                                description="While degraded: what is wrong, and why.")
    error: str | None = Field(default=None, description="Why it failed, if it did.")
    change: str | None = Field(
        default=None, description="The change of the running graph under way, or how the "
                                  "last one ended (its run directory's change.json).")

    @property
    def supervisor_gone(self) -> bool:
        """The record says it runs, but nothing keeps it running any more."""
        return not self.supervisor_alive and not self.phase.finished

    @property
    def verdict(self) -> StatusVerdict:
        if self.phase is GraphPhase.FAILED or self.supervisor_gone:
            return StatusVerdict.FAILED
        if self.phase is GraphPhase.DEGRADED:
            return StatusVerdict.DEGRADED
        return StatusVerdict.OK

    @property
    def serving(self) -> bool:
        return self.supervisor_alive and self.phase.serving


@dataclass(frozen=True)
class StartOptions:
    detach: bool = False
    ready_timeout_s: float | None = None  # None: the workers' startup budget
    keep_runs: int = DEFAULT_KEEP_RUNS
    on_event: Callable[[SupervisorEvent], None] | None = None


@dataclass(frozen=True)
class StartReport:
    """What happened before the first process started, for people (cleanups, warnings,
    the job id a scheduler gave)."""

    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class StopReport:
    """What `stop` did, one line per fact; `was_running` is False when nothing ran."""

    name: str
    was_running: bool
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RegistrationsView:
    """The router's view of a serving graph (the doctor's report without NATS), or why it
    could not be read; neither where the placement does not read it (yet)."""

    report: DoctorReport | None = None
    unavailable: str | None = None
