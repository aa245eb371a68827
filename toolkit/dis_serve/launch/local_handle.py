"""The graph handle of placement local: a supervisor on this machine, in a thread of this
process (`up` in the foreground) or in a detached process (`up --detach`), found again from
another shell through the run directory's `state.json`."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RunError, UserInputError
from ..topology import PlacementKind
from .change_record import describe_change
from .observed import (
    ObservedGraph,
    ObservedProcess,
    RegistrationsView,
    StartOptions,
    StartReport,
    StopReport,
)
from .orphans import Leftover, kill_leftovers
from .process import same_process
from .run_handle import RunHandle
from .run_lock import lock_holder
from .run_lookup import supervisor_alive
from .rundir import RunDir
from .status import GraphPhase, GraphStatus, ProcessState
from .stopping import stop_processes

if TYPE_CHECKING:
    from ..topology import Topology
    from .events import SupervisorEvent
    from .graph import PreparedRun, RunningGraph

POLL_S = 0.1


class LocalHandle(RunHandle):
    def __init__(self, run: RunDir, topo: Topology | None = None) -> None:
        super().__init__(run, topo)
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
            from .graph import launch_graph

            self._on_event = options.on_event
            # Events arrive on the supervisor's thread; they are handed on from the thread
            # that waits (wait_ready, watch), so output never interleaves.
            self._graph = launch_graph(topo, run_root=root,
                                       ready_timeout_s=options.ready_timeout_s,
                                       on_event=self._events.put, keep_runs=options.keep_runs)
            prepared = self._graph.prepared
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
        state = self._run.read_state()
        if state is None:
            holder = lock_holder(self._run)
            if holder is not None:  # preparing: nothing started, nothing recorded yet
                return ObservedGraph(
                    name=self.name, placement=PlacementKind.LOCAL, phase=GraphPhase.STARTING,
                    run_dir=str(self._run.path), model_name="", processes=[],
                    supervisor=f"up pid {holder}, preparing", supervisor_alive=True)
            raise UserInputError(f"graph {self.name!r} has no recorded state in "
                                 f"{self._run.path}", fix="start it with `dis-serve up`")
        return observe(state, alive=supervisor_alive(state), check_pids=True)

    def registrations(self) -> RegistrationsView:
        from .run_lookup import read_registrations

        return read_registrations(self._run)

    def process_names(self) -> list[str]:
        state = self._run.read_state()
        if state is not None:
            return [p.name for p in state.processes] + ["supervisor"]
        return sorted(p.stem for p in self._run.logs.glob("*.log"))

    def tail(self, process: str, lines: int) -> list[str]:
        return self._run.tail(process, lines)

    def follow(self, processes: list[str]) -> Iterator[tuple[str, str]]:
        return self._run.follow(processes)

    # --- stop ---------------------------------------------------------------------------
    def stop(self) -> StopReport:
        if self._graph is not None:
            self._graph.stop()
            return StopReport(name=self.name, was_running=True, lines=[f"stopped {self.name}"])
        result = stop_run(self._run)
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


@dataclass(frozen=True)
class StopResult:
    name: str
    had_supervisor: bool
    stale: bool = False
    supervisor_exit_s: float | None = None
    leftovers: list[Leftover] = field(default_factory=list)
    shared_keys_deleted: int = 0
    shared_streams_deleted: list[str] = field(default_factory=list)
    # The supervisor is gone but its last record is not a stopped graph (it was killed
    # mid-stop); `down` recorded the stop for it.
    unrecorded: bool = False

    def describe(self) -> list[str]:
        lines = []
        if self.had_supervisor:
            lines.append(f"stopped {self.name} (supervisor exited after "
                         f"{self.supervisor_exit_s:.1f} s)")
        if self.leftovers:
            names = ", ".join(item.name for item in self.leftovers)
            what = "left running" if self.had_supervisor else "left by a dead supervisor"
            lines.append(f"{self.name}: stopped processes {what}: {names}")
        elif self.stale:
            lines.append(f"{self.name}: its supervisor had died and none of its processes "
                         "were left; marked stopped")
        elif not self.had_supervisor:
            lines.append(f"{self.name} is not running")
        if self.had_supervisor and self.unrecorded:
            lines.append(f"{self.name}: its supervisor ended without recording the stop; "
                         "marked stopped")
        if self.shared_keys_deleted or self.shared_streams_deleted:
            lines.append(f"{self.name}: removed {self.shared_keys_deleted} etcd keys and "
                         f"{len(self.shared_streams_deleted)} JetStream streams its "
                         "namespace left on the shared etcd/NATS")
        return lines


def stop_run(run: RunDir, timeout_s: float = 60.0) -> StopResult:
    """Ask the graph's supervisor to stop it (SIGTERM) and wait; clean up whatever remains
    (everything, when the supervisor is gone)."""
    status = run.read_state()
    # Whoever holds the graph's lock owns it, also while it starts and has no state yet.
    holder = lock_holder(run)
    if status is None and holder is None:
        return StopResult(name=run.name, had_supervisor=False)
    waited = None
    alive = holder is not None or (status is not None and supervisor_alive(status))
    if alive:
        start = time.monotonic()
        # The lock's holder (an `up` still preparing, a foreground `up`, a detached graph's
        # keeper) and the supervisor (the keeper's child): each stops what it owns on
        # SIGTERM. Not their groups: a supervisor in the foreground shares the shell's. If
        # one must be killed, its children die with it (PR_SET_PDEATHSIG); the sweep below
        # gets the rest.
        owners = {pid for pid in (holder, status.supervisor_pid if status is not None
                                  and supervisor_alive(status) else None)
                  if pid is not None and pid > 0}
        stop_processes(sorted(owners), timeout_s, groups=False)
        _wait_unlocked(run, timeout_s)
        waited = time.monotonic() - start
        status = run.read_state() or status  # it may have been written meanwhile
    if status is None:
        return StopResult(name=run.name, had_supervisor=True, supervisor_exit_s=waited)
    found = kill_leftovers(status)
    unrecorded = not status.phase.finished and not supervisor_alive(status)
    if unrecorded:
        # Nobody else will: record that the graph is down, so `status` stops reporting a
        # dead supervisor's last view (one that died before, or one killed mid-stop).
        run.write_state(mark_stopped(status))
    keys, streams = _clean_shared_planes(run)
    return StopResult(name=status.name, had_supervisor=alive, stale=not alive and unrecorded,
                      supervisor_exit_s=waited, leftovers=found, shared_keys_deleted=keys,
                      shared_streams_deleted=streams, unrecorded=unrecorded)


def _wait_unlocked(run: RunDir, timeout_s: float) -> None:
    """Until the lock is free: the owner stopped and, for a detached `up` interrupted
    before it forked, the process it handed the lock to as well."""
    deadline = time.monotonic() + timeout_s
    while lock_holder(run) is not None and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _clean_shared_planes(run: RunDir) -> tuple[int, list[str]]:
    """On an external etcd/NATS, what the stopped graph's namespace left there (keys of a
    worker that died before revoking its lease, JetStream streams)."""
    if not run.topology_file.exists():
        return 0, []
    topo = run.read_topology()
    if not topo.coordination.uses_external_planes:
        return 0, []
    from ..coordination.shared_planes import clean_shared

    try:
        result = clean_shared(topo)
    except Exception as exc:  # the shared server went away: nothing to clean, nothing to stop
        raise RunError(f"{topo.name} stopped, but its namespace {topo.namespace} could not be "
                       f"cleaned on the shared etcd/NATS ({type(exc).__name__}); run "
                       f"`dis-serve doctor --clean {topo.namespace}` when it answers") from None
    return (result.keys_deleted, result.streams_deleted) if result else (0, [])


def mark_stopped(status: GraphStatus) -> GraphStatus:
    processes = [p.model_copy(update={"state": ProcessState.STOPPED, "ready": False})
                 for p in status.processes]
    return status.model_copy(update={"phase": GraphPhase.STOPPED, "processes": processes})
