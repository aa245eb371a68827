"""One handle on a graph, whatever runs it: start, wait until ready, look, read logs, stop.

    handle = handle_for(topo)            # before `up`
    handle.start(StartOptions(detach=True))
    observed = handle.wait_ready()
    handle = handle_for_run(run_dir)     # from another shell: status, logs, down
    handle.status().verdict.exit_code

Each placement has one implementation: `local_handle.LocalHandle` (a supervisor thread, or
a detached supervisor process, on this machine) and `slurm_handle.SlurmHandle` (one sbatch
job) and `hosts_handle.HostsHandle` (a run directory copied to the nodes, one agent per
node); nothing above `launch/` asks which placement it talks to. What the handle sees is
a frozen `ObservedGraph` (observed.py); what `status` exits with is its `verdict`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Protocol

from ..topology import PlacementKind
from .observed import (
    ObservedGraph,
    ObservedProcess,
    RegistrationsView,
    StartOptions,
    StartReport,
    StatusVerdict,
    StopReport,
)

if TYPE_CHECKING:
    from pathlib import Path

    from ..topology import Topology
    from .rundir import RunDir

__all__ = ["GraphHandle", "ObservedGraph", "ObservedProcess", "RegistrationsView",
           "StartOptions", "StartReport", "StatusVerdict", "StopReport", "handle_for",
           "handle_for_run"]


class GraphHandle(Protocol):
    """A graph, through whatever runs it. Every method may raise `UserInputError` (bad
    input, exit 2) or `RunError` (the graph failed, exit 1) with a one-line reason."""

    @property
    def name(self) -> str: ...

    @property
    def run(self) -> RunDir: ...

    def start(self, options: StartOptions) -> StartReport:
        """Prepare the run directory and start the graph; returns before it is ready."""
        ...

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        """Block until ready (`on_update` sees every look); RunError, everything stopped,
        when it fails or its readiness budget runs out."""
        ...

    def watch(self, on_change: Callable[[ObservedGraph], None]) -> ObservedGraph:
        """After ready, in the foreground: block until the graph ends on its own or is
        stopped; `on_change` sees each change of phase. Returns the last look."""
        ...

    def status(self) -> ObservedGraph:
        """One look now (a stale record is reported as such, not as running)."""
        ...

    def registrations(self) -> RegistrationsView:
        """What the router sees of a serving graph (etcd registrations, leases)."""
        ...

    def process_names(self) -> list[str]:
        """Names `logs` accepts, in start order (the supervisor's or the job's log last)."""
        ...

    def tail(self, process: str, lines: int) -> list[str]: ...

    def follow(self, processes: list[str]) -> Iterator[tuple[str, str]]:
        """(process, line) for each new line, until interrupted."""
        ...

    def stop(self) -> StopReport:
        """Stop everything it started (in `ProcessKind.stop_rank` order) and wait."""
        ...


def handle_for(topo: Topology, run_root: Path | None = None) -> GraphHandle:
    """The handle that starts `topo` where its placement says (hosts: prepares the run
    directory to copy to the nodes, whose agents then run it)."""
    from .rundir import RunDir

    run = RunDir.for_graph(topo.name, run_root.resolve() if run_root else None)
    if topo.placement.kind is PlacementKind.SLURM:
        from .slurm_handle import SlurmHandle

        return SlurmHandle(run, topo)
    if topo.placement.kind is PlacementKind.HOSTS:
        from .hosts_handle import HostsHandle

        return HostsHandle(run, topo)
    from .local_handle import LocalHandle

    return LocalHandle(run, topo)


def handle_for_run(run: RunDir) -> GraphHandle:
    """The handle of a graph started earlier, found through its run directory."""
    from .cluster_view import is_hosts_run
    from .slurm_jobs import read_job

    job = read_job(run)
    if job is not None:
        from .slurm_handle import SlurmHandle

        return SlurmHandle(run, job=job)
    if is_hosts_run(run):
        from .hosts_handle import HostsHandle

        return HostsHandle(run)
    from .local_handle import LocalHandle

    return LocalHandle(run)
