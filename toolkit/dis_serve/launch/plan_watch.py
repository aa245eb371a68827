"""A supervisor's view of its plan file while the graph serves: a newer revision written by a
change (change/executor.py), read only when the file itself changed. The same file is what
a restarted supervisor or node agent starts from, so a change is never reverted by one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from pydantic import ValidationError

from ..errors import DisServeError
from ..render.launch_plan import LaunchPlan


class PlanWatch:
    """`watch(revision)`: the plan when the file holds a revision above `revision`."""

    def __init__(self, path: Path, read: Callable[[], LaunchPlan]) -> None:
        self.path = path
        self.read = read
        self._seen: tuple[int, int] | None = self._stamp()

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def __call__(self, revision: int) -> LaunchPlan | None:
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return None
        try:
            plan = self.read()
        except (OSError, ValueError, ValidationError, DisServeError):
            # Half-written on shared storage (the next look reads it whole), or not
            # resolvable here: the change's executor reports the revision not taken.
            return None
        self._seen = stamp
        return plan if plan.revision > revision else None
