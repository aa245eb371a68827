"""The stop order across the nodes of a multi-node graph, from `ProcessKind.stop_rank`.

Locally one supervisor stops the frontend (no new requests), then the workers, then NATS,
then etcd. On hosts and Slurm every node's agent gets SIGTERM at the same moment (scancel,
`down`) and stops its own share in that order; across nodes, before an agent stops its
processes of one rank it waits while another node still runs a process of a lower rank,
as the other agents' state files say:
- a worker node's agent waits for the head's frontend, when the head is stopping too (a
  node stopped alone, its head serving on, waits for nothing);
- the head's agent stops NATS and etcd only once no other node runs a worker any more,
  stopping or not: every Dynamo process connects to them.
The wait is bounded: the processes waited for get the grace period and the SIGKILL wait
from the moment this agent's stop began, as the agents all began at once; past that it
stops its own anyway (a node whose agent is gone for good must not hold the stop for ever).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from ..render.launch_plan import ProcessSpec
from .process import DEFAULT_GRACE_S
from .status import GraphPhase, GraphStatus
from .stopping import KILL_WAIT_S

STOP_WAIT_S = DEFAULT_GRACE_S + KILL_WAIT_S
POLL_S = 0.1


def stop_blockers(group: list[ProcessSpec],
                  others: Mapping[str, GraphStatus | None]) -> list[str]:
    """What must stop on the other nodes before this node stops `group` (processes of one
    stop rank), as "process on node"."""
    rank = group[0].kind.stop_rank
    coordination = any(spec.kind.is_coordination for spec in group)
    found = []
    for node, status in others.items():
        if status is None or status.phase.finished:
            continue
        if not coordination and status.phase is not GraphPhase.STOPPING:
            continue
        found += [f"{proc.name} on {node}" for proc in status.processes
                  if proc.kind.stop_rank < rank and proc.state.alive]
    return found


class CrossNodeStop:
    """The supervisor's `before_stopping` hook of one node's agent: waits (bounded) until
    the other nodes have stopped what must stop first."""

    def __init__(self, read_others: Callable[[], Mapping[str, GraphStatus | None]], *,
                 say: Callable[[str], None] = print,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self._read_others = read_others
        self._say = say
        self._clock = clock
        self._sleep = sleep
        self._deadline: float | None = None

    def __call__(self, group: list[ProcessSpec]) -> None:
        if self._deadline is None:  # the stop began now, on every node at once
            self._deadline = self._clock() + STOP_WAIT_S
        names = ", ".join(spec.name for spec in group)
        waited = False
        while blockers := stop_blockers(group, self._read_others()):
            if self._clock() >= self._deadline:
                self._say(f"stopping {names} although {', '.join(blockers)} still "
                          f"run{'s' if len(blockers) == 1 else ''} ({STOP_WAIT_S:g} s after "
                          "the stop began)")
                return
            if not waited:
                self._say(f"before stopping {names}: waiting for {', '.join(blockers)}")
                waited = True
            self._sleep(POLL_S)
        if waited:
            self._say(f"stopping {names}: the other nodes have stopped what stops first")
