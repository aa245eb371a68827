"""The one table of placements. Adding a placement is a new package beside local/, hosts/,
slurm/ and kubernetes/ with a module object like theirs (base.Placement), and one entry
here; nothing else names a placement (tests/unit/test_placement_names.py).

    handle_for(topo)      the handle that starts `topo` where its placement says
    handle_for_run(run)   the handle of a run started earlier, by its run record
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserInputError
from .hosts.placement import HOSTS
from .kubernetes.placement import KUBERNETES
from .local.placement import LOCAL
from .slurm.placement import SLURM

if TYPE_CHECKING:
    from ..launch.rundir import RunDir
    from ..topology import PlacementKind, Topology
    from .base import GraphHandle, Placement
    from .kubernetes.apply import OperatorChange

# In `render --target` order. A run directory without a run record belongs to the last
# placement that says it made it (LOCAL, first, takes what the others do not).
PLACEMENTS: tuple[Placement, ...] = (LOCAL, KUBERNETES, HOSTS, SLURM)
ALL_TARGETS = "all"


def placement_of(kind: PlacementKind) -> Placement:
    return next(p for p in PLACEMENTS if p.kind is kind)


def target_names() -> list[str]:
    return [p.target for p in PLACEMENTS]


def check_target_name(target: str) -> None:
    """UserInputError unless `render --target` knows `target`."""
    if target != ALL_TARGETS and target not in target_names():
        raise UserInputError(f"unknown target {target!r}", key="--target",
                             fix=f"use {', '.join(target_names())} or {ALL_TARGETS}")


def chosen(target: str, topo: Topology) -> list[Placement]:
    """The placements `render --target TARGET` writes for `topo` (`all`: every one that
    applies to it)."""
    check_target_name(target)
    if target == ALL_TARGETS:
        return [p for p in PLACEMENTS if p.rendered_by_all(topo)]
    return [p for p in PLACEMENTS if p.target == target]


def operator_change(deployed: Topology, edited: Topology, source: str,
                    out_dir: str) -> OperatorChange:
    """A change of a graph that Dynamo's operator runs, not dis-serve (`apply --deployed`):
    what kubectl takes, rendered (placements/kubernetes/apply.py)."""
    return KUBERNETES.render_change(deployed, edited, source, out_dir)


def handle_for(topo: Topology, run_root: Path | None = None) -> GraphHandle:
    """The handle that starts `topo` where its placement says (hosts: prepares the run
    directory to copy to the nodes, whose agents then run it)."""
    from ..launch.rundir import RunDir

    run = RunDir.for_graph(topo.name, run_root.resolve() if run_root else None)
    return placement_of(topo.placement.kind).open(run, topo)


def handle_for_run(run: RunDir) -> GraphHandle:
    """The handle of a graph started earlier, by its run record; a run directory from
    before the record (or a local `up` still preparing) by what its placement wrote there."""
    record = run.read_record()
    if record is not None:
        return placement_of(record.placement).reopen(run, record)
    made = next(p for p in reversed(PLACEMENTS) if p.made_legacy_run(run))
    return made.reopen(run, None)
