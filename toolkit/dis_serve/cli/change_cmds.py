"""`scale` and `apply`: change a running graph (change/)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..inputs.options import Command

if TYPE_CHECKING:
    from ..change.executor import LiveGraph
    from ..change.requests import ApplyRequest, ScaleRequest
    from ..topology import Topology

console = Console(highlight=False, soft_wrap=True)


def scale(request: ScaleRequest) -> None:
    """Add or remove workers of a running graph's pools now: new workers start on GPUs the
    graph does not use and join once the router routes to them; leaving workers are taken
    out of routing, finish their requests (supervision.drain_timeout_s) and stop."""
    from ..change.executor import carry_out
    from ..change.request import scale_target
    from ..errors import UserInputError
    from ..launch.change_record import change_lock

    name = request.name
    live = _live(name)
    running = live.read().topology
    if running.autoscale is not None:
        raise UserInputError(f"graph {name!r} is resized by Dynamo's planner (autoscale)",
                             key="autoscale", fix="`apply` its topology with other "
                             "min_workers/max_workers, or without autoscale")
    target = scale_target(running, list(request.pools))
    with change_lock(live.run_dir, name):
        record = carry_out(live, target, "scale", say=_say)
    console.print(f"{name}: {record.message} ("
                  + ", ".join(f"{role} {n}" for role, n in record.target.items()) + ")",
                  markup=False)
    console.print(f"next: dis-serve status {name}", markup=False)


def apply(request: ApplyRequest) -> None:
    """Change a running graph to an edited topology: print what changes (workers added or
    removed, pools rolled because what their workers run changed, changes refused because
    they need a new graph), then carry it out step by step."""
    from ..change.diff import diff
    from ..change.executor import carry_out, simulate, slot_of
    from ..errors import UserInputError
    from ..inputs.yaml_input import load_model_file
    from ..launch.change_record import change_lock
    from ..topology import Topology

    file = request.file
    edited = load_model_file(Topology, file)
    if request.deployed is not None:
        _operator_change(load_model_file(Topology, request.deployed), edited, str(file),
                         request.out)
        return
    live = _live(edited.name)
    state = live.read()
    rendered = {p.name: p for p in live.render(edited, [slot_of(w) for w in state.workers])}
    changes = diff(state.topology, edited, state.workers, rendered)
    for line in changes.describe():
        console.print(line, markup=False)
    if changes.refused:
        key, why = changes.refused[0]
        raise UserInputError(f"{key} changed; a running graph cannot take it ({why})",
                             source=str(file), key=key,
                             fix=f"`dis-serve down {edited.name}` and `up` it, or undo it")
    steps = simulate(live, edited)
    if request.dry_run:
        for i, step in enumerate(steps, start=1):
            console.print(f"step {i}: {step.why}", markup=False)
        console.print(f"dry run: nothing changed; next: dis-serve apply {file}", markup=False)
        return
    with change_lock(live.run_dir, edited.name):
        record = carry_out(live, edited, "apply", say=_say)
    console.print(f"{edited.name}: {record.message}", markup=False)
    console.print(f"next: dis-serve status {edited.name}", markup=False)


def _operator_change(deployed: Topology, edited: Topology, source: str, out: Path) -> None:
    from ..files.atomic_file import write_atomic
    from ..placements.registry import operator_change

    change = operator_change(deployed, edited, source, str(out))
    out.mkdir(parents=True, exist_ok=True)
    for name, text in change.files.items():
        write_atomic(out / name, text, 0o600)
        console.print(f"wrote {out / name}", markup=False)
    for line in change.lines:
        console.print(line, markup=False)


def _live(name: str) -> LiveGraph:
    from ..placements.lookup import find_run
    from ..placements.registry import handle_for_run

    return handle_for_run(find_run(name, active_only=True)).live()


def _say(line: str) -> None:
    console.print(line, markup=False)


COMMANDS = (Command(scale, ("dis_serve.change.requests:ScaleRequest",)),
            Command(apply, ("dis_serve.change.requests:ApplyRequest",)))
