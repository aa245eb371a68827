"""Find a graph from another shell through its run directory, and ask its handle: what
`status`, `logs`, `down`, `fault`, `doctor` and `top` start from."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserInputError
from ..launch.run_lock import lock_holder
from ..launch.rundir import RunDir, default_root, list_runs
from .registry import handle_for_run

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorTarget
    from ..observe.frame import GraphLayout
    from ..render.launch_plan import LaunchPlan


def is_active(run: RunDir) -> bool:
    """Something of the graph may still run, as its placement's handle tells."""
    return handle_for_run(run).is_active()


def active_runs(root: Path | None = None) -> list[RunDir]:
    return [run for run in list_runs(root) if is_active(run)]


def find_run(name: str | None, root: Path | None = None, *, active_only: bool = True) -> RunDir:
    """The run named `name`; else the only active one; else (unless `active_only`) the only
    one there is."""
    where = root or default_root()
    if name is not None:
        run = RunDir.for_graph(name, root)
        # A directory without a record is a graph whose `up` stopped before it started
        # anything (its handle says so), not an unknown name.
        if not run.exists() and lock_holder(run) is None and not run.path.is_dir():
            known = ", ".join(r.name for r in list_runs(root)) or "none"
            raise UserInputError(f"no graph named {name!r} under {where} (graphs: {known})",
                                 fix="pass one of those names, or run from the directory "
                                     "you started it in (or set DIS_SERVE_HOME)")
        return run
    candidates = active_runs(root)
    if not candidates and not active_only:
        candidates = list_runs(root)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise UserInputError(f"no graph is running under {where}",
                             fix="start one with `dis-serve up`, or set DIS_SERVE_HOME to "
                                 "where it was started")
    names = ", ".join(r.name for r in candidates)
    raise UserInputError(f"several graphs are running ({names})", fix="name one")


def doctor_target(run: RunDir) -> DoctorTarget:
    """Our graph, from its run directory, as the doctor reads it (OSError while the run
    directory lacks what it needs)."""
    return handle_for_run(run).doctor_target()


def resolved_plan(run: RunDir) -> LaunchPlan:
    """The plan the graph runs, every address resolved; OSError while the run directory
    lacks it."""
    return handle_for_run(run).resolved_plan()


def layout_from_run(name: str | None, root: Path | None = None) -> GraphLayout:
    """What `top` watches on graph `name` (the only running one when None)."""
    return handle_for_run(find_run(name, root)).metrics_layout()
