"""The live view of a running graph, through which a change is carried out
(executor.LiveGraph): found by name (`scale`, `apply`) or by its run directory (the
planner's scaler)."""

from __future__ import annotations

from ..launch.rundir import RunDir
from ..placements.lookup import find_run
from .executor import LiveGraph


def live_for_run(run: RunDir) -> LiveGraph:
    from .local_live import LocalLive

    return LocalLive(run)


def live_graph(name: str) -> LiveGraph:
    return live_for_run(find_run(name, active_only=True))
