"""The next step of a change toward a target topology, from the workers running now. Pure.

A step adds workers, removes workers, or both; the executor carries it out and waits until
the added are ready and routable and the removed are gone before asking for the next. The
rules (issue 28):
- a pool below its target count gets all its missing workers at once, on free GPUs;
- a pool above it loses its extra workers at once, stale ones (running what the target no
  longer renders) first, then the newest;
- a pool whose workers are stale is rolled one worker at a time: a new one first where a
  free GPU allows (the next step then removes a stale one), else a stale one drained first,
  never leaving fewer workers than the pool's min_workers;
- what does not fit is refused with the numbers, before anything changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserInputError
from ..render.node_layout import WorkerSlot
from ..topology import PoolRole, Topology


@dataclass(frozen=True)
class WorkerNow:
    slot: WorkerSlot
    current: bool
    """It runs what the target topology renders for its slot."""


@dataclass(frozen=True)
class Step:
    add: tuple[WorkerSlot, ...] = ()
    remove: tuple[str, ...] = ()
    why: str = ""
    services: tuple[str, ...] = ()
    """Processes besides workers that the step starts, stops or starts again (the planner
    and its scaler when `autoscale` changes)."""

    @property
    def empty(self) -> bool:
        return not self.add and not self.remove and not self.services


class Placing:
    """Free GPUs and ports for new workers, as the step takes them."""

    def __init__(self, topo: Topology, workers: list[WorkerNow],
                 reserved_ports: set[int]) -> None:
        self.node_gpus = topo.node_gpus()
        self.used = {(w.slot.node, g) for w in workers for g in w.slot.gpus}
        self.ports = {w.slot.port for w in workers} | reserved_ports
        self.base = topo.observability.system_port_base
        self.indices: dict[PoolRole, int] = {}
        for w in workers:
            self.indices[w.slot.role] = max(self.indices.get(w.slot.role, 0),
                                            w.slot.index + 1)

    def free(self, node: int) -> list[int]:
        return [g for g in range(self.node_gpus[node]) if (node, g) not in self.used]

    def fits(self, tp: int) -> bool:
        return any(len(self.free(n)) >= tp for n in range(len(self.node_gpus)))

    def take(self, role: PoolRole, tp: int) -> WorkerSlot | None:
        node = next((n for n in range(len(self.node_gpus)) if len(self.free(n)) >= tp), None)
        if node is None:
            return None
        gpus = tuple(self.free(node)[:tp])
        self.used |= {(node, g) for g in gpus}
        port = self.base
        while port in self.ports:
            port += 1
        self.ports.add(port)
        index = self.indices.get(role, 0)
        self.indices[role] = index + 1
        return WorkerSlot(role=role, index=index, node=node, gpus=gpus, port=port)

    def describe_free(self) -> str:
        return ", ".join(f"node{n}: {len(self.free(n))} of {count}"
                         for n, count in enumerate(self.node_gpus))


def next_step(target: Topology, workers: list[WorkerNow],
              reserved_ports: set[int]) -> Step:
    """The next step toward `target` (empty: it is reached); UserInputError for what the
    GPUs cannot hold or the pool's minimum forbids. Where new workers need the GPUs of
    leaving ones, the leaving go first."""
    try:
        return _step(target, workers, reserved_ports)
    except UserInputError:
        leaving = _step(target, workers, reserved_ports, grow=False)
        if not leaving.remove:
            raise
        return Step(remove=leaving.remove, why=leaving.why + " (their GPUs first)")


def _step(target: Topology, workers: list[WorkerNow], reserved_ports: set[int], *,
          grow: bool = True) -> Step:
    placing = Placing(target, workers, reserved_ports)
    add: list[WorkerSlot] = []
    remove: list[str] = []
    why = []
    for role, pool in target.active_pools():
        mine = sorted((w for w in workers if w.slot.role is role),
                      key=lambda w: w.slot.index)
        current = [w for w in mine if w.current]
        stale = [w for w in mine if not w.current]
        if len(mine) < pool.workers:
            if grow:
                add += _grow(placing, role, pool.tensor_parallel, pool.workers - len(mine))
            why.append(f"{role.value} {len(mine)} -> {pool.workers}")
        elif len(mine) > pool.workers:
            leaving = (stale + current[::-1])[:len(mine) - pool.workers]
            remove += [w.slot.name for w in leaving]
            why.append(f"{role.value} {len(mine)} -> {pool.workers}")
        elif stale and grow:
            step = _roll_one(placing, role, pool.tensor_parallel, pool.min_workers, mine,
                             stale[0])
            add += step.add
            remove += step.remove
            why.append(step.why)
    return Step(add=tuple(add), remove=tuple(remove), why="; ".join(why))


def _grow(placing: Placing, role: PoolRole, tp: int, count: int) -> list[WorkerSlot]:
    before = placing.describe_free()
    slots = [placing.take(role, tp) for _ in range(count)]
    if any(s is None for s in slots):
        raise UserInputError(
            f"{role.value} needs {count} more workers x {tp} GPUs; the graph's nodes have "
            f"free GPUs {before} (a worker's GPUs are on one node)", key=f"pools.{role.value}",
            fix="scale another pool down first, add GPUs to the placement, or ask for fewer")
    return [s for s in slots if s is not None]


def _roll_one(placing: Placing, role: PoolRole, tp: int, floor: int,
              mine: list[WorkerNow], stale: WorkerNow) -> Step:
    if placing.fits(tp):
        slot = placing.take(role, tp)
        assert slot is not None
        return Step(add=(slot,), why=f"roll {role.value}: start {slot.name} before "
                                     f"{stale.slot.name} goes")
    if len(mine) - 1 < floor:
        raise UserInputError(
            f"rolling {role.value} needs a free slot of {tp} GPUs for a new worker first "
            f"(free: {placing.describe_free()}), or draining {stale.slot.name} first, which "
            f"would leave {len(mine) - 1} workers, below pools.{role.value}.min_workers "
            f"{floor}", key=f"pools.{role.value}.min_workers",
            fix="lower min_workers for the roll, or free GPUs")
    return Step(remove=(stale.slot.name,),
                why=f"roll {role.value}: no free GPUs, drain {stale.slot.name} first")
