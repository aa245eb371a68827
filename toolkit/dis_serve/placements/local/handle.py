"""The graph handle of placement local: a supervisor on this machine, in a thread of this
process (`up` in the foreground) or in a detached process (`up --detach`), found again from
another shell through the run directory (its run record, the supervisor's `state.json`).
Faults are signals from here; `top` and the doctor read the plan's own ports."""

from __future__ import annotations

import queue
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import RunError, UserInputError
from ...launch.change_record import describe_change
from ...launch.orphans import leftovers, supervisor_alive
from ...launch.process import same_process
from ...launch.run_lock import lock_holder
from ...launch.rundir import RunDir
from ...launch.status import GraphPhase, GraphStatus, ProcessState
from ...topology import PlacementKind
from ..reports import (
    ObservedGraph,
    ObservedProcess,
    StartOptions,
    StartReport,
    StopReport,
)
from ..run_handle import RunHandle
from .stop import stop_run

if TYPE_CHECKING:
    from ...coordination.doctor import DoctorTarget
    from ...launch.events import SupervisorEvent
    from ...launch.faults import FaultOrder
    from ...launch.graph import PreparedRun, RunningGraph
    from ...launch.run_record import RunRecord
    from ...observe.frame import GraphLayout
    from ...render.launch_plan import LaunchPlan
    from ...topology import Topology
    from .live import LocalLive

POLL_S = 0.1


class LocalHandle(RunHandle):
    def __init__(self, run: RunDir, topo: Topology | None = None,
                 record: RunRecord | None = None) -> None:
        super().__init__(run, topo, record)
        self._graph: RunningGraph | None = None
        self._events: queue.Queue[SupervisorEvent] = queue.Queue()
        self._on_event: Callable[[SupervisorEvent], None] | None = None

    # --- start --------------------------------------------------------------------------
    def start(self, options: StartOptions) -> StartReport:
        topo = self._topology_to("start", "dis-serve up")
        root = self._run.path.parent.parent
        if options.detach:
            from .daemon import start_detached

            _ready, prepared = start_detached(
                topo, run_root=root, ready_timeout_s=options.ready_timeout_s,
                keep_runs=options.keep_runs)
        else:
            from ...launch.graph import launch_graph

            self._on_event = options.on_event
            # Events arrive on the supervisor's thread; they are handed on from the thread
            # that waits (wait_ready, watch), so output never interleaves.
            self._graph = launch_graph(topo, run_root=root,
                                       ready_timeout_s=options.ready_timeout_s,
                                       on_event=self._events.put, keep_runs=options.keep_runs)
            prepared = self._graph.prepared
        self._record = prepared.record
        return _start_report(prepared)

    def wait_ready(self, on_update: Callable[[ObservedGraph], None] | None = None
                   ) -> ObservedGraph:
        if self._graph is None:
            return self.status()  # detached: start_detached returned once it was ready
        supervisor = self._graph.supervisor
        while not supervisor.ready.wait(POLL_S) and not supervisor.finished.is_set():
            self._hand_on_events()
            if on_update is not None:
                on_update(self.status())
        self._hand_on_events()
        observed = self.status()
        if on_update is not None:
            on_update(observed)
        if not supervisor.ready.is_set() or supervisor.finished.is_set():
            self._graph.stop()
            raise RunError(supervisor.error or f"{self.name} stopped before it was ready")
        return observed

    def watch(self, on_change: Callable[[ObservedGraph], None]) -> ObservedGraph:
        if self._graph is None:
            raise RunError(f"{self.name}: only the `up` that started a graph in the "
                           "foreground can watch it")
        shown = self.status().phase
        while not self._graph.supervisor.finished.wait(0.2):
            self._hand_on_events()
            observed = self.status()
            if observed.phase is not shown and observed.phase.serving:
                shown = observed.phase
                on_change(observed)
        self._hand_on_events()
        return self.status()

    def _hand_on_events(self) -> None:
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if self._on_event is not None:
                self._on_event(event)

    # --- look ---------------------------------------------------------------------------
    def status(self) -> ObservedGraph:
        if self._graph is not None:
            return observe(self._graph.status(),
                           alive=not self._graph.supervisor.finished.is_set())
        state = self._run.load_state()  # UnreadableState (exit 1) names a torn file
        if state is None:
            holder = lock_holder(self._run)
            if holder is not None:  # preparing: nothing started, nothing recorded yet
                return ObservedGraph(
                    name=self.name, placement=PlacementKind.LOCAL, phase=GraphPhase.STARTING,
                    run_dir=str(self._run.path), model_name="", processes=[],
                    supervisor=f"up pid {holder}, preparing", supervisor_alive=True)
            raise RunError(f"graph {self.name!r} is not running and never started: "
                           f"{self._run.path} holds no record of a supervisor (its last `up` "
                           "stopped before starting any process); start it with `dis-serve "
                           "up`")
        return observe(state, alive=supervisor_alive(state), check_pids=True)

    def is_active(self) -> bool:
        """A live supervisor owns the graph, or its record says it runs (a supervisor killed
        before it could say otherwise), or processes it started are still running."""
        if lock_holder(self._run) is not None:
            return True  # starting (no state written yet) or running
        status = self._run.read_state()
        if status is None:
            return False
        return (supervisor_alive(status) or not status.phase.finished
                or bool(leftovers(status)))

    def process_names(self) -> list[str]:
        state = self._run.read_state()
        if state is not None:
            return [p.name for p in state.processes] + ["supervisor"]
        return sorted(p.stem for p in self._run.logs.glob("*.log"))

    def resolved_plan(self) -> LaunchPlan:
        return self._run.read_plan()

    def full_record(self) -> RunRecord:
        """The run record; for a run directory from before it, what its plan implies."""
        record = self._record or self._run.read_record()
        if record is not None:
            return record
        from ...launch.run_record import build_record

        topo, plan = self._run.read_topology(), self._run.read_plan()
        return build_record(topo, placement=PlacementKind.LOCAL,
                            run_dir=str(self._run.path.resolve()), frontend=plan.endpoint,
                            frontend_tls=plan.endpoint_tls,
                            processes=[p.name for p in plan.processes])

    def doctor_target(self) -> DoctorTarget:
        from ..doctor_target import doctor_target

        state = self._run.read_state()
        pids = {p.pid: p.name for p in state.processes if p.pid} if state else {}
        return doctor_target(self._run, self.full_record(), self._run.read_plan(), pids)

    def metrics_layout(self) -> GraphLayout:
        from .metrics import local_layout

        return local_layout(self._run)

    # --- act ----------------------------------------------------------------------------
    def live(self) -> LocalLive:
        from .live import LocalLive

        return LocalLive(self._run)

    def fault(self, request: FaultOrder, say: Callable[[str], None]) -> str | None:
        """Signals from here, to the pids the supervisor recorded."""
        from ...launch.faults import apply_fault

        if request.node is not None:
            raise UserInputError(f"graph {self.name} runs on this machine only", key="--node",
                                 fix="drop --node")
        state = self._run.load_state()
        if state is None:
            raise UserInputError(f"graph {self.name!r} has no recorded state", key="NAME",
                                 fix="start it with `dis-serve up`")
        apply_fault(state, request.process, request.action, request.duration_s, say)
        return None

    # --- stop ---------------------------------------------------------------------------
    def stop(self) -> StopReport:
        if self._graph is not None:
            self._graph.stop()
            return StopReport(name=self.name, was_running=True, lines=[f"stopped {self.name}"])
        record = self._record or self._run.read_record()
        result = stop_run(self._run, balancer_dir=Path(record.balancer_dir)
                          if record is not None and record.balancer_dir else None)
        return StopReport(name=result.name, was_running=result.had_supervisor or result.stale
                          or bool(result.leftovers), lines=result.describe())


def _start_report(prepared: PreparedRun) -> StartReport:
    notes = []
    if prepared.cleaned:
        names = ", ".join(item.name for item in prepared.cleaned)
        notes.append(f"cleaned up processes a previous supervisor left running: {names}")
    return StartReport(notes=notes, warnings=list(prepared.warnings))


def observe(state: GraphStatus, *, alive: bool, check_pids: bool = False) -> ObservedGraph:
    """The supervisor's record as an observation; with `check_pids`, a process recorded as
    running whose pid is no longer ours shows as gone (its supervisor was killed)."""
    processes = []
    for proc in state.processes:
        current, ready = proc.state, proc.ready
        if check_pids and proc.state.alive and not same_process(proc.pid or 0,
                                                                proc.create_time):
            current, ready = ProcessState.GONE, False
        processes.append(ObservedProcess(name=proc.name, pid=proc.pid, state=current,
                                         ports=dict(proc.ports), restarts=proc.restarts,
                                         ready=ready, joining=proc.joining))
    return ObservedGraph(
        name=state.name, placement=PlacementKind.LOCAL, phase=state.phase,
        run_dir=state.run_dir, model_name=state.model_name, endpoint=state.endpoint,
        endpoint_tls=state.endpoint_tls,
        processes=processes, supervisor=f"supervisor pid {state.supervisor_pid}",
        supervisor_alive=alive, ready_after_s=state.ready_after_s, problems=state.problems,
        error=state.error, change=describe_change(Path(state.run_dir)))


