"""Faults on a schedule, and a record of what the graph's handle reported meanwhile.

Signals go to a process's group (each child of a supervisor leads its own), so a process
and whatever it spawned are hit together, as a crash or a hang would hit them (launch/faults.py
sends them). Times are wall clock nanoseconds (`time.time_ns`), the clock AIPerf stamps its
requests with.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..launch.status import GraphPhase, ProcessState
from ..placements.reports import ObservedGraph
from .scenario import Fault


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
    """One look at the graph's status."""

    at_ns: int
    serving: bool            # phase ready and every process ready
    pids: dict[str, int | None]
    lost_nodes: frozenset[str] = frozenset()
    """Nodes the graph serves without (degraded, every process of theirs gone)."""


def lost_nodes(status: ObservedGraph) -> frozenset[str]:
    """The nodes a degraded graph serves without: every process of theirs gone."""
    if status.phase is not GraphPhase.DEGRADED:
        return frozenset()
    by_node: dict[str, list[bool]] = {}
    for proc in status.processes:
        if proc.node is not None:
            by_node.setdefault(proc.node, []).append(proc.state is ProcessState.GONE)
    return frozenset(node for node, gone in by_node.items() if gone and all(gone))


class FaultInjector:
    """Applies the faults from a thread, each `fault.at_s` after `start()`, through
    `strike` (the graph handle's `fault`: signals from here for a local graph, on the node
    for Slurm and hosts), which returns once the fault is over (after a pause's SIGCONT); each
    fault strikes from a thread of its own, so a pause does not hold up the next fault.
    `pid_of` records which pid a process fault hit."""

    def __init__(self, faults: list[Fault], pid_of: Callable[[str], int | None],
                 strike: Callable[[Fault], None]) -> None:
        self.faults = sorted(faults, key=lambda f: f.at_s)
        self.pid_of = pid_of
        self.strike = strike
        self.injections: list[Injection] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._strikes: list[threading.Thread] = []
        self._thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)

    def start(self) -> None:
        if not self._thread.is_alive() and not self.injections:
            self._thread.start()

    def stop(self) -> None:
        """End the schedule and wait for the faults under way: a pause always ends with its
        SIGCONT, so no process is left stopped behind."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        for strike in self._strikes:
            strike.join()

    def _run(self) -> None:
        origin = time.monotonic()
        for fault in self.faults:
            if self._stop.wait(max(0.0, origin + fault.at_s - time.monotonic())):
                return
            thread = threading.Thread(target=self._hit, args=(fault,), daemon=True,
                                      name=f"chaos-{fault.target}")
            self._strikes.append(thread)
            thread.start()

    def _hit(self, fault: Fault) -> None:
        pid = self.pid_of(fault.process) if fault.process else None
        started = time.time_ns()
        try:
            self.strike(fault)
        except Exception as exc:
            self.errors.append(f"{fault.action.value} {fault.target}: {exc}")
            return
        self.injections.append(Injection(fault, pid, started, time.time_ns()))


class StatusSampler:
    """Samples a handle's `status()` every `period_s` from a thread until stopped."""

    def __init__(self, status: Callable[[], ObservedGraph], period_s: float = 0.1) -> None:
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
                pids={p.name: p.pid for p in status.processes},
                lost_nodes=lost_nodes(status)))
            self._stop.wait(self.period_s)
