"""`render`: every chosen placement's files under one output directory, what to know before
using them and what to run next. `render_files` is pure (what the golden tests pin);
`write_rendered` writes them (with `shared_files.write_files`, as `up` does) and removes
what the last render wrote in a placement's directory and this one does not
(`rendered_manifest.py`).

    out/topology.json, out/local/, out/k8s/, out/hosts/, out/slurm/   (registry.py's order)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from ..topology import Topology
from .base import RenderedTarget
from .registry import ALL_TARGETS, chosen, target_names
from .rendered_manifest import replace_listed
from .shared_files import TOPOLOGY_FILE, topology_json, write_files

# `render --target` choices: one per placement, from the registry, and `all`.
Target = StrEnum("Target", {name.upper(): name for name in [*target_names(), ALL_TARGETS]})


def _rendered(topo: Topology, target: str, out_dir: Path,
              source: str | None) -> list[RenderedTarget]:
    return [p.render(topo, out_dir, source) for p in chosen(target, topo)]


def render_files(topo: Topology, target: str, out_dir: Path) -> dict[str, str]:
    """Everything `render` writes but the observability files and secrets, by path
    relative to `out_dir`."""
    files: dict[str, str] = {}
    for rendered in _rendered(topo, target, out_dir, None):
        files |= rendered.files
    files[TOPOLOGY_FILE] = topology_json(topo)
    return files


@dataclass(frozen=True)
class RenderOutcome:
    written: list[str] = field(default_factory=list)  # each path, with what it is
    removed: list[str] = field(default_factory=list)  # written last time, not this time
    warnings: list[str] = field(default_factory=list)
    first_steps: list[str] = field(default_factory=list)  # before the files can be used
    next_steps: list[str] = field(default_factory=list)


def _under(directory: str, files: dict[str, str]) -> set[str]:
    """The files in one placement's directory, relative to it."""
    return {name.removeprefix(f"{directory}/") for name in files
            if name.startswith(f"{directory}/")}


def write_rendered(topo: Topology, target: str, out_dir: Path,
                   source: str | None = None) -> RenderOutcome:
    """Check, render and write the chosen placements' files (UserInputError, naming
    `source`, for what a placement cannot use at all, before anything is written)."""
    for placement in chosen(target, topo):
        placement.check_renderable(topo, source)
    parts = _rendered(topo, target, out_dir, source)
    files = {TOPOLOGY_FILE: topology_json(topo)}
    for part in parts:
        files |= part.files | part.observability
    written = [str(path) for path in write_files(files, out_dir)]
    removed = [str(path) for path in replace_listed(out_dir, {
        placement.target: _under(placement.target, files) for placement in chosen(target, topo)})]
    for part in parts:
        if part.write_inputs is not None:
            written += part.write_inputs(out_dir)
    return RenderOutcome(written=written, removed=removed,
                         warnings=[w for part in parts for w in part.warnings],
                         first_steps=[s for part in parts for s in part.first_steps],
                         next_steps=[s for part in parts for s in part.next_steps])
