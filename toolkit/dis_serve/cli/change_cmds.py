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
    from ..change.commands import scale_graph

    name = request.name
    record = scale_graph(_live(name), name, list(request.pools), say=_say)
    console.print(f"{name}: {record.message} ("
                  + ", ".join(f"{role} {n}" for role, n in record.target.items()) + ")",
                  markup=False)
    console.print(f"next: dis-serve status {name}", markup=False)


def apply(request: ApplyRequest) -> None:
    """Change a running graph to an edited topology: print what changes (workers added or
    removed, pools rolled because what their workers run changed, changes refused because
    they need a new graph), then carry it out step by step."""
    from ..change.commands import apply_topology
    from ..inputs.yaml_input import load_model_file
    from ..topology import Topology

    file = request.file
    edited = load_model_file(Topology, file)
    if request.deployed is not None:
        _operator_change(load_model_file(Topology, request.deployed), edited, str(file),
                         request.out)
        return
    record = apply_topology(_live(edited.name), edited, str(file), request.dry_run,
                            say=_say)
    if record is None:
        console.print(f"dry run: nothing changed; next: dis-serve apply {file}", markup=False)
        return
    console.print(f"{edited.name}: {record.message}", markup=False)
    console.print(f"next: dis-serve status {edited.name}", markup=False)


def _operator_change(deployed: Topology, edited: Topology, source: str, out: Path) -> None:
    from ..placements.registry import operator_change
    from ..placements.shared_files import write_files

    change = operator_change(deployed, edited, source, str(out))
    for path in write_files(change.files, out):
        console.print(f"wrote {path}", markup=False)
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
