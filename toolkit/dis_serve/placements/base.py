"""What a placement is, and the handle it opens: the two interfaces every placement module
implements (local/, hosts/, slurm/, kubernetes/), listed in one table (registry.py).

    placement = placement_of(topo)           # registry.py
    files = placement.render_files(topo, out_dir)
    handle = handle_for(topo)                # before `up`: placement.open(run, topo)
    handle.start(StartOptions(detach=True))
    observed = handle.wait_ready()
    handle = handle_for_run(run)             # from another shell: placement.reopen(run, record)
    handle.status().verdict.exit_code

A handle answers every verb for its placement: up (start, wait_ready, watch), status,
registrations, logs, down, fault, top's metrics layout, doctor's target, the plan bench and
chaos read the metrics endpoints from, and the next steps a command prints. It reads the run
record (launch/run_record.py) its `start` wrote; nothing above `placements/` asks which
placement it talks to. What the handle sees is a frozen `ObservedGraph` (reports.py); what
`status` exits with is its `verdict`.

Room for a graph that changes while it serves (issue 28) and for replicated frontends and
coordination members (issue 29): a handle's verbs to change the graph go here beside the
others, each writing a new record revision (run_record.py) that the supervisors and agents
read when they restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..change.executor import LiveGraph
    from ..coordination.doctor import DoctorTarget
    from ..launch.faults import FaultOrder
    from ..launch.run_record import RunRecord
    from ..launch.rundir import RunDir
    from ..observe.frame import GraphLayout
    from ..render.cluster_plan import NodeProcesses
    from ..render.launch_plan import LaunchPlan
    from ..topology import PlacementKind, Topology
    from .reports import (
        ObservedGraph,
        RegistrationsView,
        StartOptions,
        StartReport,
        StopReport,
    )


class GraphHandle(Protocol):
    """A graph, through whatever runs it. Every method may raise `UserInputError` (bad
    input, exit 2) or `RunError` (the graph failed, exit 1) with a one-line reason."""

    @property
    def name(self) -> str: ...

    @property
    def run(self) -> RunDir: ...

    @property
    def record(self) -> RunRecord | None:
        """The run record (None: a run directory from before it, or one still preparing)."""
        ...

    # --- up --------------------------------------------------------------------------------
    def start(self, options: StartOptions) -> StartReport:
        """Prepare the run directory, write the run record and start the graph (a placement
        whose nodes people start: prepare it and say what to run where); returns before it
        is ready."""
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

    def next_steps(self) -> list[str]:
        """What to run next once the graph is ready (the `next:` line of `up --detach`)."""
        ...

    def prepare(self, source: str | None = None) -> list[str]:
        """`dis-serve prepare`: write the run directory people copy to the nodes and start
        there, and say what to run where (UserInputError naming `source` where the
        placement starts its processes itself)."""
        ...

    # --- look ------------------------------------------------------------------------------
    def status(self) -> ObservedGraph:
        """One look now (a stale record is reported as such, not as running)."""
        ...

    def is_active(self) -> bool:
        """Something of the graph may still run (what `down` without a name stops)."""
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

    def resolved_plan(self) -> LaunchPlan:
        """The plan the graph runs, every address resolved (bench's and chaos's metrics
        endpoints, tokenizer and TLS); OSError while the run directory lacks it."""
        ...

    def doctor_target(self) -> DoctorTarget:
        """The graph as the doctor reads it: etcd and NATS where the graph's clients reach
        them, with its TLS files, the metrics endpoints, expectations, pids."""
        ...

    def metrics_layout(self) -> GraphLayout:
        """What `top` scrapes: the frontend's and every worker's metrics, readiness and
        restarts, the nodes."""
        ...

    # --- act -------------------------------------------------------------------------------
    def live(self) -> LiveGraph:
        """The running graph as a change of it sees it (`scale`, `apply`, the planner's
        scaler: change/executor.py): its plan at a revision, rendered processes for worker
        slots, the next revision written where every supervisor reconciles to it, and what
        the supervisors made of it."""
        ...

    def fault(self, request: FaultOrder, say: Callable[[str], None]) -> str | None:
        """Apply the fault where the graph's pids live and return once it is over (after
        a pause's SIGCONT); the node it hit (None on a single-machine graph)."""
        ...

    def stop(self) -> StopReport:
        """Stop everything it started (in `ProcessKind.stop_rank` order) and wait."""
        ...


class NodeReach(Protocol):
    """How the client reaches one node's agent of a multi-node graph: Slurm through a step
    of the graph's own job on that node (`srun --jobid`), hosts through a request file in
    the shared run directory that the agent takes within a second."""

    def inflict(self, node: NodeProcesses, request: FaultOrder,
                say: Callable[[str], None]) -> None:
        """Run `dis-serve inflict` on the node; return once the fault is over."""
        ...


@dataclass(frozen=True)
class RenderedTarget:
    """What `render` writes for one placement, relative to the output directory: its files
    (what the golden tests pin), the Prometheus and Grafana files made from them, what to
    know before using them, and the commands to run next."""

    files: dict[str, str]
    observability: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    first_steps: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)
    # What is made when written, not rendered as text (a new CA, the mocker's model card),
    # as `up` makes it: writes it under the output directory and says what it wrote.
    write_inputs: Callable[[Path], list[str]] | None = None


class PlacementDefaults:
    """What a placement says when it has nothing to refuse, warn of or note: the answers of
    every placement but the ones that check a topology against their platform."""

    def check_renderable(self, topo: Topology, source: str | None) -> None:
        return None

    def validate_warnings(self, topo: Topology) -> list[str]:
        return []

    def validate_notes(self, topo: Topology) -> list[str]:
        return []


class Placement(Protocol):
    """One placement: where a graph runs and everything that differs with it."""

    @property
    def target(self) -> str:
        """Its name as `render --target` takes it and as its rendered directory is named."""
        ...

    @property
    def kind(self) -> PlacementKind | None:
        """The topology placement it runs (None: a render target only, whose cluster runs
        it: Kubernetes)."""
        ...

    def rendered_by_all(self, topo: Topology) -> bool:
        """Whether `render --target all` writes it for this topology."""
        ...

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        """Its files for `render` into `out_dir/<target>/` (pure but for `write_inputs`;
        `source` is the topology file as the next steps name it)."""
        ...

    def check_renderable(self, topo: Topology, source: str | None) -> None:
        """UserInputError (naming `source`) for what this placement cannot use at all."""
        ...

    def validate_warnings(self, topo: Topology) -> list[str]:
        """What `validate` warns about this topology when it is rendered here."""
        ...

    def validate_notes(self, topo: Topology) -> list[str]:
        """What `validate` says this placement will need or hold (facts, not warnings)."""
        ...

    def topology_section(self, nodes: int) -> dict:
        """The topology's `placement:` for a graph planned on `nodes` nodes (`plan`)."""
        ...

    def open(self, run: RunDir, topo: Topology) -> GraphHandle:
        """The handle that starts `topo` (UserInputError where nothing can start it)."""
        ...

    def reopen(self, run: RunDir, record: RunRecord | None) -> GraphHandle:
        """The handle of a run it started earlier (record None: from before the record)."""
        ...

    def made_legacy_run(self, run: RunDir) -> bool:
        """Whether a run directory without a run record is one of its runs, by what an
        earlier dis-serve wrote there (registry order decides; the last says yes)."""
        ...
