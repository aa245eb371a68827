"""What the supervisor tells whoever watches it: one small frozen class per kind of event,
and `describe` as the one place that turns an event into the line people read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Ready:
    after_s: float
    endpoint: str


@dataclass(frozen=True)
class Failed:
    """The graph cannot serve and is being stopped."""

    reason: str


@dataclass(frozen=True)
class Restarting:
    """A process exited (or was stopped for hanging); it starts again after `delay_s`."""

    process: str
    what: str
    delay_s: float


@dataclass(frozen=True)
class Restarted:
    process: str
    pid: int | None
    restarts: int


@dataclass(frozen=True)
class Hung:
    process: str
    unanswered: int


@dataclass(frozen=True)
class GaveUp:
    """A process is left down for now; the graph serves on without it (degraded), and
    retries it after `retry_in_s` (None: never)."""

    process: str
    why: str
    log_path: str
    log_tail: str
    retry_in_s: float | None


@dataclass(frozen=True)
class RegistrationsLost:
    """The router saw fewer workers of a type than run and answer ready for longer than the
    grace: those workers are restarted so they register again."""

    worker_type: str
    router: str
    processes: list[str]


@dataclass(frozen=True)
class Retrying:
    """A given-up process gets another try on the slow clock."""

    process: str


@dataclass(frozen=True)
class Changed:
    """The plan's revision changed while the graph serves (scale, apply, the planner)."""

    revision: int
    started: list[str]
    draining: list[str]


@dataclass(frozen=True)
class StateWriteFailing:
    path: str
    error: str


@dataclass(frozen=True)
class StateWritten:
    path: str


SupervisorEvent = (Ready | Failed | Restarting | Restarted | Hung | GaveUp | Retrying
                   | RegistrationsLost | Changed | StateWriteFailing | StateWritten)


def describe(event: SupervisorEvent) -> str:
    """The line (or lines) people read for `event`."""
    match event:
        case Ready(after_s, endpoint):
            return f"ready after {after_s:.2f} s: {endpoint}"
        case Failed(reason):
            return f"failed: {reason}"
        case Restarting(process, what, delay_s):
            return f"{process} {what}; restarting in {delay_s:g} s"
        case Restarted(process, pid, restarts):
            return f"{process} restarted (pid {pid}, restart {restarts})"
        case Hung(process, unanswered):
            return (f"{process} left {unanswered} health probes in a row unanswered; "
                    "restarting it")
        case GaveUp(process, why, log_path, log_tail, retry_in_s):
            retry = f"; trying it again in {retry_in_s:g} s" if retry_in_s else ""
            return (f"degraded: {process} {why}{retry}; last lines of {log_path}:\n"
                    f"{log_tail}")
        case Retrying(process):
            return f"{process}: trying again after giving up"
        case Changed(revision, started, draining):
            parts = ([f"starting {', '.join(started)}"] if started else []) + (
                [f"draining {', '.join(draining)}"] if draining else [])
            return f"revision {revision}: " + ("; ".join(parts) or "nothing to start or drain")
        case RegistrationsLost(worker_type, router, processes):
            return (f"the router lost {worker_type} workers that run and are ready "
                    f"({router}): restarting {', '.join(processes)} so they register again")
        case StateWriteFailing(path, error):
            return f"cannot write {path} ({error}); supervising on and retrying"
        case StateWritten(path):
            return f"{path} written again"
    raise AssertionError(f"unknown event {event!r}")
