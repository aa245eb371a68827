"""Faults on a schedule, and a record of what the supervisor reported meanwhile.

Signals go to a process's group (each child of the supervisor leads its own), so a process
and whatever it spawned are hit together, as a crash or a hang would hit them. Times are wall
clock nanoseconds (`time.time_ns`), the clock AIPerf stamps its requests with.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..launch.status import GraphPhase, GraphStatus
from .scenario import Fault, FaultAction


@dataclass(frozen=True)
class Injection:
    """A fault as it happened: the pid it hit, when it began and ended (a pause ends at
    SIGCONT; a kill ends when it is sent)."""

    fault: Fault
    pid: int | None
    started_ns: int
    ended_ns: int


@dataclass(frozen=True)
class Sample:
    """One look at the supervisor's status."""

    at_ns: int
    serving: bool            # phase ready and every process ready
    pids: dict[str, int | None]


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


class FaultInjector:
    """Applies the faults from a thread, each `fault.at_s` after `start()`."""

    def __init__(self, faults: list[Fault], pid_of: Callable[[str], int | None]) -> None:
        self.faults = sorted(faults, key=lambda f: f.at_s)
        self.pid_of = pid_of
        self.injections: list[Injection] = []
        self._stop = threading.Event()
        self._paused: set[int] = set()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)

    def start(self) -> None:
        if not self._thread.is_alive() and not self.injections:
            self._thread.start()

    def stop(self) -> None:
        """End the schedule; never leave a process stopped behind."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        with self._lock:
            for pid in self._paused:
                _signal_group(pid, signal.SIGCONT)
            self._paused.clear()

    def _run(self) -> None:
        origin = time.monotonic()
        pending = [(f.at_s, "begin", f) for f in self.faults]
        pending += [(f.ends_at_s, "end", f) for f in self.faults
                    if f.action is FaultAction.PAUSE]
        pending.sort(key=lambda item: (item[0], item[1] == "begin"))
        begun: dict[int, tuple[int | None, int]] = {}
        for at_s, what, fault in pending:
            if self._stop.wait(max(0.0, origin + at_s - time.monotonic())):
                return
            if what == "begin":
                pid = self.pid_of(fault.process)
                started = time.time_ns()
                if pid is not None:
                    with self._lock:
                        _signal_group(pid, fault.action.signal)
                        if fault.action is FaultAction.PAUSE:
                            self._paused.add(pid)
                begun[id(fault)] = (pid, started)
                if fault.action is not FaultAction.PAUSE:
                    self.injections.append(Injection(fault, pid, started, started))
            else:
                pid, started = begun[id(fault)]
                with self._lock:
                    if pid is not None:
                        _signal_group(pid, signal.SIGCONT)
                        self._paused.discard(pid)
                self.injections.append(Injection(fault, pid, started, time.time_ns()))


class StatusSampler:
    """Samples `status()` every `period_s` from a thread until stopped."""

    def __init__(self, status: Callable[[], GraphStatus], period_s: float = 0.1) -> None:
        self.status = status
        self.period_s = period_s
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            status = self.status()
            self.samples.append(Sample(
                at_ns=time.time_ns(),
                serving=status.phase is GraphPhase.READY
                and all(p.ready for p in status.processes),
                pids={p.name: p.pid for p in status.processes}))
            self._stop.wait(self.period_s)
