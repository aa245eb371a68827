"""What the supervisor observed about a running graph (frozen; the topology is the spec)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ..security.pki_files import EndpointTls
from ..topology import ProcessKind


class ProcessState(StrEnum):
    PENDING = "pending"        # not started yet
    STARTING = "starting"      # spawned, not yet ready
    READY = "ready"
    UNHEALTHY = "unhealthy"    # was ready; its health probe fails now (still running)
    BACKOFF = "backoff"        # crashed; waiting to restart
    DRAINING = "draining"      # left the plan (a change): out of routing, finishing requests
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"          # exited and will not be restarted (given up)
    # Only in an observation, never recorded: the record says it runs, but its pid is no
    # longer ours (its supervisor was killed).
    GONE = "gone"

    @property
    def alive(self) -> bool:
        return self in (ProcessState.STARTING, ProcessState.READY, ProcessState.UNHEALTHY,
                        ProcessState.DRAINING, ProcessState.STOPPING)


class GraphPhase(StrEnum):
    STARTING = "starting"
    READY = "ready"
    DEGRADED = "degraded"      # serving, but a process is down, restarting or given up
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"

    @property
    def finished(self) -> bool:
        return self in (GraphPhase.STOPPED, GraphPhase.FAILED)

    @property
    def serving(self) -> bool:
        return self in (GraphPhase.READY, GraphPhase.DEGRADED)


class ProcessStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    kind: ProcessKind
    pid: int | None = Field(default=None, description="Current pid (None before the first start).")
    create_time: float | None = Field(
        default=None, description="The pid's start time (psutil): tells our process from a "
                                  "later one that reuses the pid.")
    state: ProcessState = ProcessState.PENDING
    ports: dict[str, int] = Field(default_factory=dict)
    restarts: int = 0
    ready: bool = False
    exit_code: int | None = Field(default=None, description="Last exit status, if it exited.")
    joining: bool = Field(
        default=False, exclude_if=lambda joining: not joining,
        description="Started by a change of the running graph and not routed to yet.")


class GraphStatus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    namespace: str
    run_dir: str
    endpoint: str
    endpoint_tls: EndpointTls | None = Field(
        default=None, description="An https endpoint's CA (and client certificate) paths.")
    model_name: str
    supervisor_pid: int
    supervisor_create_time: float
    phase: GraphPhase
    started_at: float = Field(description="Unix time the supervisor started the graph.")
    ready_after_s: float | None = Field(
        default=None, description="Seconds from the first spawn to ready.")
    error: str | None = Field(default=None, description="Why the graph failed, if it did.")
    problems: list[str] = Field(
        default_factory=list,
        description="While degraded: what is down, restarting or given up, and why.")
    processes: list[ProcessStatus]
    revision: int = Field(
        default=0, exclude_if=lambda revision: revision == 0,
        description="The plan revision the supervisor has reconciled its processes to (0: "
                    "the plan `up` started; every change of the running graph raises it).")

    def process(self, name: str) -> ProcessStatus:
        for proc in self.processes:
            if proc.name == name:
                return proc
        raise KeyError(name)
