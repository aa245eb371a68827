"""`scale` and `apply` as the CLI runs them, on a running graph's live view: the change
checked (the planner's graph refuses `scale`; an edited topology's refused keys refuse
`apply`), simulated before the first write, then carried out under the run's change lock.
Every line a user reads goes through `say`; the CLI only finds the graph and prints."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..errors import UserInputError
from ..launch.change_record import change_lock
from .diff import diff
from .executor import carry_out, simulate, slot_of
from .targets import scale_target

if TYPE_CHECKING:
    from ..launch.change_record import ChangeRecord
    from ..topology import Topology
    from .executor import LiveGraph


def scale_graph(live: LiveGraph, name: str, pools: list[str],
                say: Callable[[str], None]) -> ChangeRecord:
    """Each `POOL=N` of `pools` as that pool's worker count now; the finished record."""
    running = live.read().topology
    if running.autoscale is not None:
        raise UserInputError(f"graph {name!r} is resized by Dynamo's planner (autoscale)",
                             key="autoscale", fix="`apply` its topology with other "
                             "min_workers/max_workers, or without autoscale")
    target = scale_target(running, pools)
    with change_lock(live.run_dir, name):
        return carry_out(live, target, "scale", say=say)


def apply_topology(live: LiveGraph, edited: Topology, source: str, dry_run: bool,
                   say: Callable[[str], None]) -> ChangeRecord | None:
    """Say what `edited` changes in the running graph and carry it out; None for a dry run,
    which only says the steps it would take."""
    state = live.read()
    rendered = {p.name: p for p in live.render(edited, [slot_of(w) for w in state.workers])}
    changes = diff(state.topology, edited, state.workers, rendered)
    for line in changes.describe():
        say(line)
    if changes.refused:
        key, why = changes.refused[0]
        raise UserInputError(f"{key} changed; a running graph cannot take it ({why})",
                             source=source, key=key,
                             fix=f"`dis-serve down {edited.name}` and `up` it, or undo it")
    steps = simulate(live, edited)
    if dry_run:
        for i, step in enumerate(steps, start=1):
            say(f"step {i}: {step.why}")
        return None
    with change_lock(live.run_dir, edited.name):
        return carry_out(live, edited, "apply", say=say)
