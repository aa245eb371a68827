"""Faults on one node of a graph, applied on that node, where its pids mean something.

`dis-serve inflict RUN_DIR --node NODE [--process P] --action A [--duration S]` runs on
the node (Slurm: an `srun --overlap` step of the graph's job on that node; hosts: started
by the node's agent from a request in the run directory, agent_contact.py) and reads the
node's pids from its agent's `state-<node>.json`. A process's fault goes to its process
group, as `chaos` does locally. A node fault hits every process of the node and its agent
too: `pause` is a hung (or cut-off) node, SIGSTOP of the agent first (so it does not see
its children hang and restart them) and SIGCONT of it last; `kill` is a crashed node. A
local graph's faults are applied from the client the same way, with the supervisor's
`state.json`. Each placement's handle says how its nodes are reached (`GraphHandle.fault`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from enum import StrEnum

from ..errors import UserInputError
from .status import GraphStatus


class FaultAction(StrEnum):
    KILL = "kill"      # SIGKILL to the process's group: a crash
    TERM = "term"      # SIGTERM: a clean exit of a process that should run forever
    PAUSE = "pause"    # SIGSTOP for duration_s, then SIGCONT: a hung process

    @property
    def signal(self) -> signal.Signals:
        return {FaultAction.KILL: signal.SIGKILL, FaultAction.TERM: signal.SIGTERM,
                FaultAction.PAUSE: signal.SIGSTOP}[self]

    @property
    def replaces_process(self) -> bool:
        """Recovery from this fault means a new process (a pause may heal in place)."""
        return self is not FaultAction.PAUSE


@dataclass(frozen=True)
class FaultOrder:
    """A fault asked of a running graph: a process (on a named node) or a whole node."""

    action: FaultAction
    process: str | None = None
    node: str | None = None
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.node is None and self.process is None:
            raise UserInputError("nothing to fault", key="--process",
                                 fix="give --process NAME, --node NODE, or both")

    def inflict_args(self) -> list[str]:
        """`dis-serve inflict`'s options for it, on the node."""
        return [*(["--process", self.process] if self.process else []),
                "--action", self.action.value,
                *(["--duration", f"{self.duration_s:g}"] if self.duration_s is not None
                  else [])]


@dataclass(frozen=True)
class Hit:
    """One pid a fault reached: a process's group, or the agent alone."""

    name: str
    pid: int
    group: bool


def targets(state: GraphStatus, process: str | None) -> list[Hit]:
    """Whom the fault reaches, in the order it reaches them (agent first for a node)."""
    if process is not None:
        try:
            pid = state.process(process).pid
        except KeyError:
            names = ", ".join(p.name for p in state.processes)
            raise UserInputError(f"no process {process!r} in {state.name}'s state "
                                 f"({names})", key="--process", fix="use one of those") from None
        return [Hit(process, pid, True)] if pid else []
    return [Hit("agent", state.supervisor_pid, False)] + [
        Hit(p.name, p.pid, True) for p in state.processes if p.pid and p.state.alive]


def _send(hit: Hit, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        (os.killpg if hit.group else os.kill)(hit.pid, sig)


def apply_fault(state: GraphStatus, process: str | None, action: FaultAction,
                duration_s: float | None, say=print) -> list[Hit]:
    """Signal the targets; a pause holds them stopped for `duration_s`, then continues them
    (last stopped first), also when interrupted."""
    hits = targets(state, process)
    for hit in hits:
        _send(hit, action.signal)
        say(f"{action.signal.name} {hit.name} (pid {hit.pid})")
    if action is FaultAction.PAUSE:
        try:
            time.sleep(duration_s or 0.0)
        finally:
            for hit in reversed(hits):
                _send(hit, signal.SIGCONT)
                say(f"SIGCONT {hit.name} (pid {hit.pid})")
    return hits
