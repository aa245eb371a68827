"""What every placement's graph handle shares: the run directory it stands for, its run
record, the topology when it was made to start the graph (a handle found through its run
directory has none and can look, act on and stop the graph, not start it), and the verbs
that read only the run directory (logs, registrations, next steps)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import RunError, UserInputError

if TYPE_CHECKING:
    from ..change.executor import LiveGraph
    from ..coordination.doctor import DoctorTarget
    from ..launch.run_record import RunRecord
    from ..launch.rundir import RunDir
    from ..topology import Topology
    from .reports import RegistrationsView


class RunHandle:
    def __init__(self, run: RunDir, topo: Topology | None = None,
                 record: RunRecord | None = None) -> None:
        self._run = run
        self._topo = topo
        self._record = record

    @property
    def name(self) -> str:
        return self._run.name

    @property
    def run(self) -> RunDir:
        return self._run

    @property
    def record(self) -> RunRecord | None:
        return self._record

    def _topology_to(self, verb: str, command: str) -> Topology:
        """The topology to `verb` the graph with; RunError naming `command` without one."""
        if self._topo is None:
            raise RunError(f"{self.name}: a handle found through its run directory cannot "
                           f"{verb} the graph; `{command}` its topology")
        return self._topo

    def live(self) -> LiveGraph:
        """A placement whose graph dis-serve supervises offers its live view; the others
        (Kubernetes: the operator rolls the DGD) do not."""
        raise UserInputError(f"graph {self.name!r} cannot be changed while it runs here",
                             fix="on Kubernetes, `dis-serve render --target k8s` the edited "
                                 "topology and `kubectl apply` it")

    def _write_record(self, record: RunRecord) -> None:
        self._record = record
        self._run.write_record(record)

    def next_steps(self) -> list[str]:
        name = self.name
        return [f"next: dis-serve status {name} | dis-serve logs frontend --name {name} | "
                f"dis-serve down {name}"]

    def prepare(self, source: str | None = None) -> list[str]:
        """`dis-serve prepare`: only a graph whose nodes people start has a run directory to
        prepare and copy to them."""
        from ..topology import PlacementKind

        topo = self._topology_to("prepare", "dis-serve prepare")
        by_hand = ", ".join(k.value for k in PlacementKind if k.started_by_hand)
        raise UserInputError(f"placement is {topo.placement.kind.value}, not {by_hand}",
                             source=source, key="placement",
                             fix="give placement.hosts.nodes, or `dis-serve up` this graph")

    def doctor_target(self) -> DoctorTarget:
        raise NotImplementedError

    def registrations(self) -> RegistrationsView:
        """What the router sees of a serving graph: the doctor's report without NATS."""
        from dataclasses import replace

        from ..coordination.doctor import run_doctor
        from .reports import RegistrationsView

        try:
            target = self.doctor_target()
        except OSError as exc:  # the run directory's inputs were removed while it runs
            return RegistrationsView(unavailable=str(exc))
        return RegistrationsView(report=run_doctor(replace(target, nats_url=None)))

    def tail(self, process: str, lines: int) -> list[str]:
        return self._run.tail(process, lines)

    def follow(self, processes: list[str]) -> Iterator[tuple[str, str]]:
        return self._run.follow(processes)
