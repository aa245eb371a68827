"""Start a launch plan in order, keep it running and healing, stop it in reverse.

One thread owns every child for its whole life (see process.py on PR_SET_PDEATHSIG): it
spawns, polls, restarts and stops. Other threads only read `snapshot` and call `request_stop`.

- Start: etcd and NATS; each Dynamo process (the frontend and every worker at once: the
  frontend discovers workers whenever they register) as soon as the planes it connects to
  accept connections. Ready: every process passes its probe (probes.py) and the router
  sees every prefill and decode worker.
- Exit: any exit of any process (status 0 too: all of them should run until stopped) is a
  failure; restart_policy.py decides when it starts again (the topology's `supervision`
  section). etcd and NATS keep their data directories, so their state survives; workers
  register again. Too many exits within the window give up that process alone: the graph
  runs on, `degraded`, says why, and tries it again on a slow clock. Before it was first
  ready (or with no slow retry) the graph fails when it cannot serve without it: etcd, NATS
  or the frontend given up, or every worker of a pool role.
- Liveness (liveness_policy.py decides): a process whose health probe goes unanswered
  (hung, not merely "notready") makes the graph degraded; a worker is restarted like a
  crash after `liveness.failures` misses in a row, etcd and NATS (NATS: its INFO line, not
  just the accept) after twice that. Workers that run and answer ready but that the router
  does not see for a few seconds (etcd lost their registrations) are restarted so they
  register again; meanwhile the graph is degraded.
- Control: a state file that cannot be written (the run directory deleted) is reported and
  retried; nothing that goes wrong on disk stops supervision.
- Stop: the frontend first (no new requests), then the workers, then NATS, then etcd; each a
  SIGTERM to its process group, a grace period, then SIGKILL. `before_stopping` is called
  before each of those groups (a node's agent waits there for the other nodes).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..coordination.probes import (
    RouterView,
    expected_workers,
    http_client,
    probe_process,
    router_view,
    tcp_accepts,
)
from ..render.launch_plan import LaunchPlan, ProcessSpec
from ..topology import ProcessKind
from . import events
from .drain import Drain
from .liveness_policy import RegistrationWatch, unanswered_before_restart
from .process import DEFAULT_GRACE_S, ChildProcess, create_time
from .restart_policy import GiveUp, RestartTracker
from .rundir import RunDir
from .secrets import GraphSecrets
from .status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from .stopping import stop_processes

if TYPE_CHECKING:
    import httpx

LOG_LINES_ON_FAILURE = 15
LOG_ROTATION_EVERY_S = 5.0
# A hung process gets this long to honour SIGTERM before SIGKILL (it is hung: not long).
HUNG_GRACE_S = 1.0
# A worker restarted to register again is healthy and routed no requests: a short grace.
RE_REGISTER_GRACE_S = 2.0
PLANES_POLL_S = 0.01
_LIVE = (ProcessState.STARTING, ProcessState.READY, ProcessState.UNHEALTHY)


@dataclass
class _Slot:
    child: ChildProcess
    restart: RestartTracker
    state: ProcessState = ProcessState.PENDING
    ready: bool = False
    restarts: int = 0
    unanswered_probes: int = 0
    exit_code: int | None = None
    problem: str | None = None
    joining: bool = False  # started by a change; not routed to yet
    drain: Drain | None = None

    @property
    def spec(self) -> ProcessSpec:
        return self.child.spec


class GraphFailed(Exception):
    """The graph cannot serve (a process it cannot do without given up, not ready in time)."""


class Supervisor:
    # No default readiness budget here: its one home is startup_budget (callers pass it).
    def __init__(self, plan: LaunchPlan, run_dir: RunDir, *, ready_timeout_s: float,
                 poll_s: float = 0.05, steady_poll_s: float = 0.25,
                 on_event: Callable[[events.SupervisorEvent], None] | None = None,
                 secrets: GraphSecrets | None = None,
                 before_stopping: Callable[[list[ProcessSpec]], None] | None = None,
                 plan_source: Callable[[int], LaunchPlan | None] | None = None) -> None:
        self.plan = plan
        # A newer revision of the plan (a change of the running graph), or None: asked
        # every steady poll with the revision reconciled so far (plan_watch.py).
        self.plan_source = plan_source or (lambda _revision: None)
        self.run_dir = run_dir
        self.ready_timeout_s = ready_timeout_s
        self.supervision = plan.supervision
        self.poll_s = poll_s
        self.steady_poll_s = steady_poll_s
        self.on_event = on_event or (lambda _msg: None)
        # Called with each group of `stop_order` before it is stopped (a node's agent waits
        # there for the other nodes, node_stop.py).
        self.before_stopping = before_stopping or (lambda _group: None)
        self.ready = threading.Event()
        self.finished = threading.Event()
        self.error: str | None = None
        self._stop = threading.Event()
        self._stop_requested = False  # set before _stop, which a signal handler may re-enter
        self._secrets = secrets or GraphSecrets()
        self._slots = [self._new_slot(spec) for spec in plan.processes]
        self._phase = GraphPhase.STARTING
        self._started_wall = time.time()
        self._first_spawn: float | None = None
        self._ready_after: float | None = None
        self._router: RouterView | None = None
        self._own_create_time = create_time(os.getpid()) or 0.0
        self._signature: tuple = ()
        self._state_write_failing = False
        self._client: httpx.Client | None = None
        self._live_client: httpx.Client | None = None
        self._registrations = RegistrationWatch()
        self._router_problem: str | None = None
        self.snapshot = self._build_status()

    # --- public -------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Safe in a signal handler, also in one that interrupts this very call: `down`
        signals both a detached graph's keeper (which passes it on) and its supervisor, and
        a second handler that ran while the first one's Event.set held the event's lock
        (not reentrant) would wait for it forever in the same thread."""
        if self._stop_requested:
            return
        self._stop_requested = True
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        return self._stop_requested

    def run(self) -> None:
        """Thread body: start, supervise until stopped or failed, always stop everything."""
        try:
            self._bring_up()
            self._supervise()
        except GraphFailed as exc:
            self.error = str(exc)
            self.on_event(events.Failed(str(exc)))
        except BaseException as exc:
            self.error = f"supervisor error: {exc!r}"
            raise
        finally:
            try:
                self._shutdown()
            finally:
                for client in (self._client, self._live_client):
                    if client is not None:
                        client.close()
                self._phase = GraphPhase.FAILED if self.error else GraphPhase.STOPPED
                self._publish()
                self.finished.set()

    # --- bring-up -----------------------------------------------------------------------
    def _bring_up(self) -> None:
        if self._stop.is_set():
            return  # stopped before it started: nothing to spawn
        deadline = time.monotonic() + self.ready_timeout_s
        infra = [s for s in self._slots if s.spec.kind.is_coordination]
        waiting = {id(s): self._planes_of(s, infra) for s in self._slots if s not in infra}
        for slot in infra:
            self._spawn(slot)
        self._client = http_client(tls=self.plan.endpoint_tls)  # while etcd and NATS start
        while not self._stop.is_set():
            self._check_exits()
            self._restart_due()
            self._spawn_unblocked(waiting)
            # Probes only once every process started: one can block for its timeout (etcd's
            # /health during its leader election), which must not hold back a spawn.
            if not waiting:
                self._probe([s for s in self._slots if not s.ready and s.state in _LIVE],
                            self._http)
                if self._all_up():
                    self._mark_ready()
                    return
            # While a Dynamo process waits for its planes to accept, look again soon: etcd
            # listens within ~0.1 s, and every poll lost here delays the whole bring-up.
            self._wait_or_timeout(deadline, PLANES_POLL_S if waiting else self.poll_s)

    @staticmethod
    def _planes_of(slot: _Slot, infra: list[_Slot]) -> list[_Slot]:
        """The embedded planes a Dynamo process connects to as it starts: etcd always
        (discovery), NATS when it is told where NATS is (its request or event plane, or the
        KV router's events, may use it). It need not wait for etcd's leader election
        (/health), only for the port: it spends the election importing."""
        return [s for s in infra if s.spec.kind is ProcessKind.ETCD
                or "NATS_SERVER" in slot.spec.env]

    def _spawn_unblocked(self, waiting: dict[int, list[_Slot]]) -> None:
        """Start each Dynamo process not started yet whose planes accept connections now
        (the frontend and the workers at once: workers wait for the planes, not for it)."""
        planes = {id(p): p for needed in waiting.values() for p in needed}.values()
        accepting = {id(p) for p in planes if p.state in _LIVE
                     and all(tcp_accepts(port, p.spec.probed_host)
                             for port in p.spec.ports.values())}
        for slot in self._slots:
            needed = waiting.get(id(slot))
            if needed is not None and all(id(p) in accepting for p in needed):
                del waiting[id(slot)]
                self._spawn(slot)

    def _all_up(self) -> bool:
        """Every process not given up is ready, and the router has attached every such
        worker (a worker can be healthy before the frontend has discovered it)."""
        running = [s for s in self._slots if s.state is not ProcessState.FAILED
                   and s.spec.kind.gates_readiness]
        if not all(s.ready for s in running):
            return False
        workers = [s.spec for s in running if s.spec.kind is ProcessKind.WORKER]
        self._router = router_view(self._http, self.plan, workers)
        return self._router.complete

    def _wait_or_timeout(self, deadline: float, wait_s: float) -> None:
        if time.monotonic() > deadline:
            raise GraphFailed(self._not_ready_message())
        self._publish()
        self._stop.wait(wait_s)

    def _mark_ready(self) -> None:
        # A node with nothing to start yet (a Slurm job's spare node) is ready at once.
        started = self._first_spawn
        self._ready_after = 0.0 if started is None else time.monotonic() - started
        self._phase = self._serving_phase()
        self._publish()
        self.ready.set()
        self.on_event(events.Ready(self._ready_after, self.plan.endpoint))

    def _not_ready_message(self) -> str:
        pending = [s for s in self._slots if not s.ready and s.state is not ProcessState.FAILED]
        if pending:
            slot = pending[0]
            what = f"{slot.spec.name} is not ready (state {slot.state.value})"
        else:
            # Every process is healthy but the frontend has not attached some worker type:
            # the log of a worker of that type says why.
            missing = self._router.missing() if self._router else []
            workers = [s for s in self._slots if s.spec.role is not None
                       and s.spec.role.worker_type in missing]
            slot = workers[0] if workers else self._slots[-1]
            seen = self._router.describe() if self._router else "unknown"
            what = f"the router does not see every worker (seen/expected: {seen})"
        return (f"{self.plan.name}: not ready after {self.ready_timeout_s:g} s: {what}; "
                f"last lines of {slot.child.log_path}:\n" + self._last_lines(slot))

    def _last_lines(self, slot: _Slot) -> str:
        lines = self.run_dir.tail(slot.spec.name, LOG_LINES_ON_FAILURE)
        return "\n".join("  " + line for line in lines) or "  (empty log)"

    @property
    def _http(self) -> httpx.Client:
        if self._client is None:
            self._client = http_client(tls=self.plan.endpoint_tls)
        return self._client

    # --- steady state -------------------------------------------------------------------
    def _supervise(self) -> None:
        liveness = self.supervision.liveness
        self._live_client = http_client(liveness.timeout_s, self.plan.endpoint_tls)
        next_health = time.monotonic() + liveness.period_s
        next_rotation = time.monotonic() + LOG_ROTATION_EVERY_S
        while not self._stop.is_set():
            if time.monotonic() >= next_rotation:
                self.run_dir.rotate_logs()
                next_rotation = time.monotonic() + LOG_ROTATION_EVERY_S
            self._check_exits()
            self._restart_due()
            self._reconcile()
            starting = [s for s in self._slots if s.state is ProcessState.STARTING]
            if starting:
                self._probe(starting, self._http)
            if time.monotonic() >= next_health:
                self._probe([s for s in self._slots
                             if s.state in (ProcessState.READY, ProcessState.UNHEALTHY)],
                            self._live_client, liveness=True)
                self._check_registrations()
                next_health = time.monotonic() + liveness.period_s
            self._phase = self._serving_phase()
            self._publish()
            self._stop.wait(self.poll_s if starting else self.steady_poll_s)

    def _serving_phase(self) -> GraphPhase:
        """Ready when every process is, but for those a change is bringing in or taking
        out, and a planner still starting (neither is a problem of the graph)."""
        settled = all(s.state is ProcessState.READY or s.state is ProcessState.DRAINING
                      or (s.state is ProcessState.STARTING
                          and (s.joining or not s.spec.kind.gates_readiness))
                      for s in self._slots)
        return (GraphPhase.READY if settled and self._router_problem is None
                else GraphPhase.DEGRADED)

    def _probe(self, slots: list[_Slot], client: httpx.Client, *,
               liveness: bool = False) -> None:
        for slot in slots:
            if not slot.child.alive:
                continue
            probe = probe_process(client, slot.spec, self.plan,
                                  starting=not liveness and not slot.ready,
                                  was_ready=slot.ready)
            if probe.ready and not slot.ready:
                slot.restart.ready()
            slot.ready = probe.ready
            slot.unanswered_probes = 0 if probe.answered else slot.unanswered_probes + 1
            if probe.ready:
                slot.state, slot.problem = ProcessState.READY, None
            elif slot.state is ProcessState.READY:
                slot.state = ProcessState.UNHEALTHY
                slot.problem = "answers its health probe, not ready" if probe.answered \
                    else "does not answer its health probe"
            limit = unanswered_before_restart(slot.spec.kind, self.supervision.liveness)
            if liveness and limit is not None and slot.unanswered_probes >= limit:
                self._restart_hung(slot)

    def _restart_hung(self, slot: _Slot) -> None:
        self.on_event(events.Hung(slot.spec.name, slot.unanswered_probes))
        self._stop_for_restart(slot, HUNG_GRACE_S, "was hung")

    def _stop_for_restart(self, slot: _Slot, grace_s: float, what: str) -> None:
        assert slot.child.pid is not None
        code = slot.child.exit_status(stop_processes([slot.child.pid], grace_s))
        self._on_exit(slot, code, time.monotonic(), what)

    def _check_registrations(self) -> None:
        """Workers that run and answer ready but that the router does not see (etcd lost
        their registrations) are restarted, so they register again (liveness_policy.py)."""
        # The frontend need only answer: not listing the model is what a lost
        # registration looks like from there (workers publish the model card).
        planes_up = all(s.state is ProcessState.READY for s in self._slots
                        if s.spec.kind.is_coordination)
        frontend_answers = all(s.state in (ProcessState.READY, ProcessState.UNHEALTHY)
                               and s.unanswered_probes == 0 for s in self._slots
                               if s.spec.kind is ProcessKind.FRONTEND)
        ready = [s for s in self._slots
                 if s.spec.kind is ProcessKind.WORKER and s.state is ProcessState.READY]
        if not planes_up or not frontend_answers or not ready:
            self._registrations.reset()
            self._router_problem = None
            return
        view = router_view(self._live_client or self._http, self.plan, [s.spec for s in ready])
        if not view.answered:
            return  # the frontend's liveness probe reports that
        if view.complete:
            for slot in ready:
                slot.joining = False
        # A worker a change started is expected once the router has attached it.
        ready = [s for s in ready if not s.joining]
        view = RouterView(seen=view.seen, expected=expected_workers(self.plan,
                                                                    [s.spec for s in ready]))
        self._router_problem = None if view.complete else (
            f"the router sees fewer workers than are running and ready ({view.describe()})")
        for worker_type in self._registrations.observe(time.monotonic(), view.seen,
                                                        view.expected):
            lost = [s for s in ready if s.spec.role is not None
                    and s.spec.role.worker_type == worker_type]
            self.on_event(events.RegistrationsLost(worker_type, view.describe(),
                                                   [s.spec.name for s in lost]))
            for slot in lost:
                self._stop_for_restart(slot, RE_REGISTER_GRACE_S, "lost its registration")
            self._router_problem = None

    def _check_exits(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.state not in _LIVE:
                continue
            code = slot.child.poll()
            if code is not None:
                self._on_exit(slot, code, now, f"exited with status {code}")

    def _on_exit(self, slot: _Slot, code: int | None, now: float, what: str) -> None:
        slot.exit_code = code
        slot.ready = False
        slot.unanswered_probes = 0
        decision = slot.restart.exited(now, what)
        if isinstance(decision, GiveUp):
            self._give_up(slot, decision, now)
            return
        slot.state = ProcessState.BACKOFF
        slot.problem = f"{what}; restarting"
        self.on_event(events.Restarting(slot.spec.name, what, decision.delay_s))

    def _give_up(self, slot: _Slot, decision: GiveUp, now: float) -> None:
        """This process stays down (until the slow clock tries it again); the graph serves
        on without it if it can. Before the graph was first ready, or with no slow retry, a
        process it cannot serve without fails the graph."""
        slot.state = ProcessState.FAILED
        retry_in = None if decision.retry_at is None else decision.retry_at - now
        cannot_serve = self._cannot_serve_without(slot)
        why = decision.why + (f"; {cannot_serve}" if cannot_serve else "")
        slot.problem = why + (f"; trying again in {retry_in:g} s" if retry_in is not None
                              else "")
        if cannot_serve and (retry_in is None or not self.ready.is_set()):
            raise GraphFailed(f"{slot.spec.name} {decision.why}; last lines of "
                              f"{slot.child.log_path}:\n{self._last_lines(slot)}\n"
                              f"{cannot_serve}; stopping it")
        self.on_event(events.GaveUp(slot.spec.name, why, str(slot.child.log_path),
                                    self._last_lines(slot), retry_in_s=retry_in))

    def _cannot_serve_without(self, slot: _Slot) -> str | None:
        spec = slot.spec
        if spec.kind.serves_alone:
            peers = [s for s in self._slots if s.spec.kind is spec.kind]
            # Replicas the graph runs elsewhere (other nodes) or here carry on without it.
            if spec.replicas > len(peers) or not all(s.state is ProcessState.FAILED
                                                     for s in peers):
                return None
            return f"the graph cannot serve without {spec.name}"
        if spec.role is None:
            return None  # the planner: the graph serves on at its current size
        peers = [s for s in self._slots if s.spec.role is slot.spec.role]
        if all(s.state is ProcessState.FAILED for s in peers):
            assert slot.spec.role is not None
            return f"no {slot.spec.role.value} worker is left; the graph cannot serve"
        return None

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.state in (ProcessState.BACKOFF, ProcessState.FAILED) \
                    and slot.restart.due(now):
                slow = slot.restart.restarting()
                slot.restarts += 1
                self._spawn(slot)
                if slow:
                    self.on_event(events.Retrying(slot.spec.name))
                self.on_event(events.Restarted(slot.spec.name, slot.child.pid, slot.restarts))

    def _spawn(self, slot: _Slot) -> None:
        slot.child.start()
        if self._first_spawn is None:
            self._first_spawn = slot.child.started_at
        slot.state = ProcessState.STARTING
        slot.ready = False
        slot.exit_code = None
        # Recorded before anything else can happen, so a later `down` can find the pid even if
        # this supervisor is killed the next instant.
        self._publish()

    # --- changes of the running graph -------------------------------------------------------
    def _new_slot(self, spec: ProcessSpec) -> _Slot:
        return _Slot(ChildProcess(spec, self.run_dir.log_file(spec.name),
                                  self._secrets.env_for(spec.kind)),
                     RestartTracker(spec.kind.restart_policy(self.supervision)))

    def _reconcile(self) -> None:
        """Take a newer revision of the plan: start the processes it adds, drain those it
        drops, start again those it changes (the planner's config); finish drains."""
        self._finish_drains()
        plan = self.plan_source(self.plan.revision)
        if plan is None or plan.revision <= self.plan.revision:
            return
        wanted = {spec.name: spec for spec in plan.processes}
        for slot in list(self._slots):
            spec = wanted.get(slot.spec.name)
            if slot.drain is not None or spec == slot.spec:
                continue
            if spec is None:
                self._leave(slot)
            else:  # the same process, run differently (the planner's config): at once
                self._stop_for_change(slot)
        present = {s.spec.name for s in self._slots if s.drain is None}
        self.plan, self.supervision = plan, plan.supervision
        for spec in plan.processes:
            if spec.name not in present:
                slot = self._new_slot(spec)
                self._slots.append(slot)
                slot.joining = spec.kind is ProcessKind.WORKER
                self._spawn(slot)
        self.on_event(events.Changed(plan.revision, sorted(set(wanted) - present),
                                     [s.spec.name for s in self._slots if s.drain]))
        self._publish()

    def _leave(self, slot: _Slot) -> None:
        """Out of the plan: a live process drains (SIGTERM, drain timeout, SIGKILL); one
        that is not running goes at once."""
        if slot.child.alive:
            slot.drain = Drain.start(slot.child, self.supervision.drain_timeout_s)
            slot.state, slot.ready, slot.problem = ProcessState.DRAINING, False, None
        else:
            slot.drain = Drain(child=slot.child, deadline=0.0)
            slot.state = ProcessState.DRAINING
        slot.restart.restart_at = None

    def _stop_for_change(self, slot: _Slot) -> None:
        if slot.child.pid is not None:
            stop_processes([slot.child.pid], DEFAULT_GRACE_S)
        self._slots.remove(slot)

    def _finish_drains(self) -> None:
        for slot in [s for s in self._slots if s.drain is not None]:
            if slot.child.popen is None or slot.drain.done():
                self._slots.remove(slot)
                self._publish()

    # --- shutdown -----------------------------------------------------------------------
    def _shutdown(self) -> None:
        self._phase = GraphPhase.STOPPING
        self._publish()  # the other nodes' agents wait on this (node_stop.py)
        order = stop_order([s.spec for s in self._slots])
        by_name = {s.spec.name: s for s in self._slots}
        for group in order:
            self.before_stopping(group)
            slots = [by_name[spec.name] for spec in group]
            for slot in slots:
                if slot.child.alive:
                    slot.state = ProcessState.STOPPING
            self._publish()
            # Exited leaders too: a leader that crashed may have left children in its group.
            started = [s for s in slots if s.child.pid is not None]
            reaped = stop_processes([s.child.pid for s in started], DEFAULT_GRACE_S)
            for slot in slots:
                if slot.child.popen is not None:
                    slot.exit_code = slot.child.exit_status(reaped)
                if slot.state is not ProcessState.FAILED:
                    slot.state = ProcessState.STOPPED
                slot.ready = False
                slot.restart.restart_at = None
            self._publish()  # each group's end, which the other nodes' agents wait for

    # --- status -------------------------------------------------------------------------
    def _build_status(self) -> GraphStatus:
        return GraphStatus(
            name=self.plan.name, namespace=self.plan.namespace, run_dir=str(self.run_dir.path),
            endpoint=self.plan.endpoint, endpoint_tls=self.plan.endpoint_tls,
            model_name=self.plan.model_name,
            supervisor_pid=os.getpid(), supervisor_create_time=self._own_create_time,
            phase=self._phase, started_at=self._started_wall, ready_after_s=self._ready_after,
            error=self.error,
            problems=[f"{s.spec.name}: {s.problem}" for s in self._slots
                      if s.problem and self._phase is GraphPhase.DEGRADED]
            + ([f"router: {self._router_problem}"] if self._router_problem
               and self._phase is GraphPhase.DEGRADED else []),
            processes=[ProcessStatus(
                name=s.spec.name, kind=s.spec.kind, pid=s.child.pid,
                create_time=s.child.create_time, state=s.state, ports=dict(s.spec.ports),
                restarts=s.restarts, ready=s.ready, exit_code=s.exit_code,
                joining=s.joining)
                for s in self._slots],
            revision=self.plan.revision)

    def _publish(self) -> None:
        # Called every poll: compare a cheap signature, build and write only on a change.
        signature = (self._phase, self.error, self._ready_after, self._router_problem,
                     self.plan.revision, tuple(
            (s.spec.name, s.state, s.ready, s.restarts, s.child.pid, s.exit_code, s.problem,
             s.joining) for s in self._slots))
        if signature == self._signature and self.run_dir.state_file.exists():
            return
        self.snapshot = self._build_status()
        try:
            self.run_dir.write_state(self.snapshot)
        except OSError as exc:
            # Say so once, keep supervising, and try again at the next poll (recreating the
            # run directory if someone removed it).
            if not self._state_write_failing:
                self.on_event(events.StateWriteFailing(str(self.run_dir.state_file), str(exc)))
            self._state_write_failing = True
            with contextlib.suppress(OSError):
                self.run_dir.prepare()
            return
        if self._state_write_failing:
            self.on_event(events.StateWritten(str(self.run_dir.state_file)))
            self._state_write_failing = False
        self._signature = signature


def stop_order(specs: list[ProcessSpec]) -> list[list[ProcessSpec]]:
    """Groups stopped one after the other; the processes of a group are stopped together."""
    groups: dict[int, list[ProcessSpec]] = {}
    for spec in specs:
        groups.setdefault(spec.kind.stop_rank, []).append(spec)
    return [list(reversed(groups[r])) for r in sorted(groups)]
