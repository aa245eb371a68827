"""Carry out a change of a running graph step by step (steps.py), whatever runs it.

The graph is reached through a `LiveGraph` (each placement's handle offers one): read the
plan at its revision, render processes for worker slots, write the next revision of the
plan, look at what the supervisors made of it. Each step writes one revision; every
supervisor and agent reconciles its share toward it (new workers started, leaving ones
drained: SIGTERM takes a Dynamo worker out of routing at once, it finishes its requests
within `supervision.drain_timeout_s`, then SIGKILL); the step is done when every added
worker is ready and the router routes to it, and every removed one is gone. A new worker
not ready within its startup budget stops the change there: it is removed again, the
workers already serving keep serving, the record says why. The topology file is the
target's only once every step is done, so `status` and the next `apply` read the graph as
it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from ..errors import RunError
from ..launch.change_record import ChangeRecord, ChangeState, ChangeStep, write_change
from ..launch.startup_budget import worker_startup_budget_s
from ..launch.status import ProcessState
from ..render.launch_plan import ProcessSpec
from ..render.node_layout import WorkerSlot
from ..topology import PoolRole, ProcessKind, Topology
from .steps import Step, WorkerNow, next_step

POLL_S = 0.2
# Beyond the drain timeout: SIGKILL, the reaping and the supervisor's next look.
REMOVE_MARGIN_S = 15.0
# A change of 4,096 workers (the most a pool holds) rolled one by one stays below it.
MAX_STEPS = 10_000


@dataclass(frozen=True)
class LiveState:
    topology: Topology
    revision: int
    processes: list[ProcessSpec]

    @property
    def workers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.kind is ProcessKind.WORKER]


@dataclass(frozen=True)
class ProcessLook:
    state: ProcessState
    ready: bool
    role: PoolRole | None = None


@dataclass(frozen=True)
class LiveLook:
    revisions: list[int]
    """Each supervisor's (each node agent's) reconciled revision."""
    processes: dict[str, ProcessLook] = field(default_factory=dict)
    """As the supervisors record them (a leaving worker is there until it is gone)."""
    routed: dict[str, int] = field(default_factory=dict)
    """Worker type -> workers the frontend's router attached."""

    def serving(self, name: str) -> bool:
        """Ready, and the router attaches at least as many workers of its type as are
        ready (so it routes to this one too)."""
        me = self.processes.get(name)
        if me is None or me.role is None or not (me.ready and me.state is ProcessState.READY):
            return False
        peers = sum(1 for p in self.processes.values() if p.role is not None
                    and p.role.worker_type == me.role.worker_type and p.ready
                    and p.state is ProcessState.READY)
        return self.routed.get(me.role.worker_type, 0) >= peers


class LiveGraph(Protocol):
    @property
    def run_dir(self) -> Path: ...

    def read(self) -> LiveState: ...

    def render(self, topo: Topology, slots: list[WorkerSlot]) -> list[ProcessSpec]:
        """Every process of `topo` with its workers in `slots` (as the plan file holds
        them: a cluster plan's run-time variables unresolved)."""
        ...

    def write(self, processes: list[ProcessSpec], revision: int, topo: Topology) -> None:
        """The plan's next revision: these processes, `topo`'s supervision settings."""
        ...

    def write_topology(self, topo: Topology) -> None: ...

    def look(self) -> LiveLook: ...


def slot_of(spec: ProcessSpec) -> WorkerSlot:
    assert spec.role is not None
    return WorkerSlot(role=spec.role, index=WorkerSlot.index_of(spec.name), node=spec.node,
                      gpus=tuple(spec.gpus), port=spec.ports["system"])


def simulate(live: LiveGraph, target: Topology) -> list[Step]:
    """Every step from the plan now to `target`, as if each succeeds (what `apply --dry-run`
    prints); UserInputError, before anything changes, for a step the GPUs or a pool's
    minimum forbid."""
    state = live.read()
    steps: list[Step] = []
    while len(steps) < MAX_STEPS:
        step, processes = _plan_step(live, state, target)
        if step.empty:
            return steps
        steps.append(step)
        state = LiveState(topology=target, revision=state.revision + 1, processes=processes)
    raise RunError(f"no end to the change after {MAX_STEPS} steps (a bug: please report it)")


def carry_out(live: LiveGraph, target: Topology, source: str,
              say: Callable[[str], None] = lambda _line: None) -> ChangeRecord:
    """Reach `target` (a validated topology of the running graph); the finished record.
    Refused (UserInputError) before any step when a step would not fit; RunError, after the
    record says so, when a new worker was not ready in time."""
    simulate(live, target)
    record = ChangeRecord(source=source, started_at=time.time(),
                          target={role.value: pool.workers for role, pool in
                                  target.active_pools()})
    write_change(live.run_dir, record)
    while True:
        state = live.read()
        step, processes = _plan_step(live, state, target)
        if step.empty:
            break
        revision = state.revision + 1
        say(f"revision {revision}: {step.why}")
        started = time.time()
        live.write(processes, revision, target)
        record = record.with_step(ChangeStep(
            revision=revision, why=step.why, added=[s.name for s in step.add],
            removed=list(step.remove), started_at=started))
        write_change(live.run_dir, record)
        late = _wait_for(live, revision, step, target)
        if late:
            return _stop(live, record, late, revision, target)
        took = time.time() - started
        record = record.model_copy(update={"steps": [*record.steps[:-1], record.steps[-1]
                                                     .model_copy(update={"took_s": took})]})
        write_change(live.run_dir, record)
        say(f"revision {revision}: done in {took:.1f} s")
    live.write_topology(target)
    record = record.finish(ChangeState.DONE, "every pool at its target")
    write_change(live.run_dir, record)
    return record


def _plan_step(live: LiveGraph, state: LiveState, target: Topology
               ) -> tuple[Step, list[ProcessSpec]]:
    """The next step, and the processes of the plan once it is taken: the target's render
    for services, kept current workers and added ones; stale workers kept as they run."""
    slots = [slot_of(w) for w in state.workers]
    rendered = {p.name: p for p in live.render(target, slots)}
    now = {w.name: w for w in state.workers}
    workers = [WorkerNow(slot=s, current=rendered.get(s.name) == now[s.name]) for s in slots]
    reserved = {port for p in state.processes if p.kind is not ProcessKind.WORKER
                for port in p.ports.values()}
    step = next_step(target, workers, reserved)
    kept = [s for s in slots if s.name not in step.remove]
    after = {p.name: p for p in live.render(target, [*kept, *step.add])}
    processes = [p for p in after.values() if p.kind is not ProcessKind.WORKER]
    for slot in [*kept, *step.add]:
        stale = slot.name in now and rendered.get(slot.name) != now[slot.name]
        processes.append(now[slot.name] if stale else after[slot.name])
    before = {p.name: p for p in state.processes if p.kind is not ProcessKind.WORKER}
    services = sorted(n for n in before.keys() | after.keys()
                      if after.get(n, before.get(n)).kind is not ProcessKind.WORKER
                      and before.get(n) != after.get(n))
    if services:
        why = "; ".join([*filter(None, [step.why]), f"start {', '.join(services)} anew"])
        step = replace(step, services=tuple(services), why=why)
    return step, processes


def _wait_for(live: LiveGraph, revision: int, step: Step, target: Topology) -> list[str]:
    """Until the step is taken; the added workers not ready and routed in their startup
    budget (empty: all are)."""
    start = time.monotonic()
    add_deadline = start + worker_startup_budget_s(target)
    remove_deadline = start + target.supervision.drain_timeout_s + REMOVE_MARGIN_S
    while True:
        look = live.look()
        taken = bool(look.revisions) and min(look.revisions) >= revision
        late = [s.name for s in step.add if not (taken and look.serving(s.name))]
        gone = taken and not any(name in look.processes for name in step.remove)
        now = time.monotonic()
        if not late and gone:
            return []
        if late and now > add_deadline:
            return late
        if not gone and now > remove_deadline:
            raise RunError(f"{', '.join(step.remove)} still running "
                           f"{now - start:.0f} s after leaving the plan (revision "
                           f"{revision}); see the supervisor's log")
        time.sleep(POLL_S)


def _stop(live: LiveGraph, record: ChangeRecord, late: list[str], revision: int,
          target: Topology) -> ChangeRecord:
    """Take the late workers out again; everything that served keeps serving."""
    state = live.read()
    live.write([p for p in state.processes if p.name not in late], revision + 1, target)
    _wait_for(live, revision + 1, Step(remove=tuple(late)), target)
    budget = worker_startup_budget_s(target)
    message = (f"{', '.join(late)} not ready and routed within its startup budget "
               f"({budget:g} s); removed again, the other workers kept serving")
    record = record.finish(ChangeState.STOPPED, message)
    write_change(live.run_dir, record)
    raise RunError(f"change stopped: {message}; see `dis-serve logs {late[0]}`")
