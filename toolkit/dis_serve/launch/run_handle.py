"""What every graph handle (local_handle, slurm_handle, hosts_handle) shares: the run
directory it stands for, and the topology when it was made to start the graph. A handle
found through its run directory (`handle_for_run`) has none and can only look and stop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import RunError

if TYPE_CHECKING:
    from ..topology import Topology
    from .rundir import RunDir


class RunHandle:
    def __init__(self, run: RunDir, topo: Topology | None = None) -> None:
        self._run = run
        self._topo = topo

    @property
    def name(self) -> str:
        return self._run.name

    @property
    def run(self) -> RunDir:
        return self._run

    def _topology_to(self, verb: str, command: str) -> Topology:
        """The topology to `verb` the graph with; RunError naming `command` without one."""
        if self._topo is None:
            raise RunError(f"{self.name}: a handle found through its run directory cannot "
                           f"{verb} the graph; `{command}` its topology")
        return self._topo
