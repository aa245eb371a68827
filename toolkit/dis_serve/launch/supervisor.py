"""Start a launch plan in order, keep it running, stop it in reverse.

One thread owns every child for its whole life (see process.py on PR_SET_PDEATHSIG): it
spawns, polls, restarts and stops. Other threads only read `snapshot` and call `request_stop`.

- Start: etcd and NATS, wait until their ports accept connections; then the frontend and
  every worker at once (the frontend discovers workers whenever they register). Ready: every
  process passes its probe (readiness.py) and the router sees every prefill and decode
  worker.
- Crash: a worker that exits is restarted after a capped exponential backoff; more than
  `max_failures` crashes of one worker within `window_s` gives up on the graph. etcd, NATS or
  the frontend exiting fails the graph at once (nothing can route without them).
- Stop: the frontend first (no new requests), then the workers, then NATS, then etcd; each a
  SIGTERM to its process group, a grace period, then SIGKILL.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..render.launch_plan import LaunchPlan, ProcessKind, ProcessSpec
from .process import DEFAULT_GRACE_S, ChildProcess, create_time
from .readiness import (
    RouterView,
    http_client,
    process_ready,
    router_view,
    tcp_accepts,
    worker_type,
)
from .rundir import RunDir
from .status import GraphPhase, GraphStatus, ProcessState, ProcessStatus

if TYPE_CHECKING:
    import httpx

LOG_LINES_ON_FAILURE = 15
LOG_ROTATION_EVERY_S = 5.0


@dataclass(frozen=True)
class RestartPolicy:
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0
    max_failures: int = 5
    window_s: float = 300.0

    def delay(self, consecutive_failures: int) -> float:
        exponent = max(0, consecutive_failures - 1)
        return min(self.backoff_cap_s, self.backoff_base_s * (2 ** min(exponent, 30)))


@dataclass
class _Slot:
    child: ChildProcess
    state: ProcessState = ProcessState.PENDING
    ready: bool = False
    restarts: int = 0
    consecutive_failures: int = 0
    crashes: collections.deque[float] = field(default_factory=collections.deque)
    restart_at: float | None = None
    exit_code: int | None = None

    @property
    def spec(self) -> ProcessSpec:
        return self.child.spec


class GraphFailed(Exception):
    """The graph cannot run (infrastructure died, a worker kept crashing, not ready in time)."""


class Supervisor:
    def __init__(self, plan: LaunchPlan, run_dir: RunDir, *, ready_timeout_s: float = 120.0,
                 policy: RestartPolicy | None = None, grace_s: float = DEFAULT_GRACE_S,
                 poll_s: float = 0.05, steady_poll_s: float = 0.25,
                 health_every_s: float = 1.0,
                 on_event: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.run_dir = run_dir
        self.ready_timeout_s = ready_timeout_s
        self.policy = policy or RestartPolicy()
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.steady_poll_s = steady_poll_s
        self.health_every_s = health_every_s
        self.on_event = on_event or (lambda _msg: None)
        self.ready = threading.Event()
        self.finished = threading.Event()
        self.error: str | None = None
        self._stop = threading.Event()
        self._slots = [_Slot(ChildProcess(spec, run_dir.log_file(spec.name)))
                       for spec in plan.processes]
        self._phase = GraphPhase.STARTING
        self._started_wall = time.time()
        self._first_spawn: float | None = None
        self._ready_after: float | None = None
        self._router: RouterView | None = None
        self._own_create_time = create_time(os.getpid()) or 0.0
        self._signature: tuple = ()
        self._client: httpx.Client | None = None
        self.snapshot = self._build_status()

    # --- public -------------------------------------------------------------------------
    def request_stop(self) -> None:
        self._stop.set()

    def run(self) -> None:
        """Thread body: start, supervise until stopped or failed, always stop everything."""
        try:
            self._bring_up()
            self._supervise()
        except GraphFailed as exc:
            self.error = str(exc)
            self.on_event(f"failed: {exc}")
        except BaseException as exc:
            self.error = f"supervisor error: {exc!r}"
            raise
        finally:
            try:
                self._shutdown()
            finally:
                if self._client is not None:
                    self._client.close()
                self._phase = GraphPhase.FAILED if self.error else GraphPhase.STOPPED
                self._publish()
                self.finished.set()

    # --- bring-up -----------------------------------------------------------------------
    def _bring_up(self) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        infra = [s for s in self._slots if s.spec.kind in (ProcessKind.ETCD, ProcessKind.NATS)]
        dynamo = [s for s in self._slots if s not in infra]
        for slot in infra:
            self._spawn(slot)
        # Dynamo's processes need etcd and NATS to accept connections when they connect, not
        # etcd's leader election to be over (/health): they spend the election importing.
        while not self._stop.is_set():
            self._check_exits()
            if all(tcp_accepts(port) for s in infra for port in s.spec.ports.values()):
                break
            self._wait_or_timeout(deadline)
        for slot in dynamo:
            if not self._stop.is_set():
                self._spawn(slot)
        self._client = http_client()  # while the Dynamo processes import
        while not self._stop.is_set():
            self._check_exits()
            self._restart_due()
            self._probe([s for s in self._slots if not s.ready])
            if all(s.ready for s in self._slots):
                self._router = router_view(self._http, self.plan)
                if self._router.complete:
                    self._mark_ready()
                    return
            self._wait_or_timeout(deadline)

    def _wait_or_timeout(self, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise GraphFailed(self._not_ready_message())
        self._publish()
        self._stop.wait(self.poll_s)

    def _mark_ready(self) -> None:
        assert self._first_spawn is not None
        self._ready_after = time.monotonic() - self._first_spawn
        self._phase = GraphPhase.READY
        self._publish()
        self.ready.set()
        self.on_event(f"ready after {self._ready_after:.2f} s: {self.plan.endpoint}")

    def _not_ready_message(self) -> str:
        pending = [s for s in self._slots if not s.ready]
        if pending:
            slot = pending[0]
            what = f"{slot.spec.name} is not ready (state {slot.state.value})"
        else:
            # Every process is healthy but the frontend has not attached some worker type:
            # the log of a worker of that type says why.
            missing = self._router.missing() if self._router else []
            workers = [s for s in self._slots if s.spec.role is not None
                       and worker_type(s.spec.role) in missing]
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
            self._client = http_client()
        return self._client

    # --- steady state -------------------------------------------------------------------
    def _supervise(self) -> None:
        next_health = time.monotonic() + self.health_every_s
        next_rotation = time.monotonic() + LOG_ROTATION_EVERY_S
        while not self._stop.is_set():
            if time.monotonic() >= next_rotation:
                self.run_dir.rotate_logs()
                next_rotation = time.monotonic() + LOG_ROTATION_EVERY_S
            self._check_exits()
            self._restart_due()
            starting = [s for s in self._slots if s.state is ProcessState.STARTING]
            if starting:
                self._probe(starting)
            if time.monotonic() >= next_health:
                self._probe([s for s in self._slots
                             if s.state in (ProcessState.READY, ProcessState.UNHEALTHY)])
                next_health = time.monotonic() + self.health_every_s
            self._publish()
            self._stop.wait(self.poll_s if starting else self.steady_poll_s)

    def _probe(self, slots: list[_Slot]) -> None:
        for slot in slots:
            if not slot.child.alive:
                continue
            ok = process_ready(self._http, slot.spec, self.plan)
            if ok and not slot.ready:
                slot.consecutive_failures = 0
            slot.ready = ok
            if ok:
                slot.state = ProcessState.READY
            elif slot.state is ProcessState.READY:
                slot.state = ProcessState.UNHEALTHY

    def _check_exits(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.state not in (ProcessState.STARTING, ProcessState.READY,
                                  ProcessState.UNHEALTHY):
                continue
            code = slot.child.poll()
            if code is None:
                continue
            slot.exit_code = code
            slot.ready = False
            if not slot.spec.kind.restarts_on_crash:
                slot.state = ProcessState.FAILED
                raise GraphFailed(
                    f"{slot.spec.name} exited with status {code}; the graph cannot run "
                    f"without it; last lines of {slot.child.log_path}:\n"
                    + self._last_lines(slot))
            slot.crashes.append(now)
            while slot.crashes and now - slot.crashes[0] > self.policy.window_s:
                slot.crashes.popleft()
            if len(slot.crashes) >= self.policy.max_failures:
                slot.state = ProcessState.FAILED
                raise GraphFailed(
                    f"{slot.spec.name} crashed {len(slot.crashes)} times within "
                    f"{self.policy.window_s:g} s (last exit status {code}); giving up; last "
                    f"lines of {slot.child.log_path}:\n" + self._last_lines(slot))
            slot.consecutive_failures += 1
            delay = self.policy.delay(slot.consecutive_failures)
            slot.restart_at = now + delay
            slot.state = ProcessState.BACKOFF
            self.on_event(f"{slot.spec.name} exited with status {code}; restarting in "
                          f"{delay:g} s")

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self._slots:
            if slot.state is ProcessState.BACKOFF and slot.restart_at is not None \
                    and now >= slot.restart_at:
                slot.restarts += 1
                slot.restart_at = None
                self._spawn(slot)
                self.on_event(f"{slot.spec.name} restarted (pid {slot.child.pid}, "
                              f"restart {slot.restarts})")

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

    # --- shutdown -----------------------------------------------------------------------
    def _shutdown(self) -> None:
        self._phase = GraphPhase.STOPPING
        order = stop_order([s.spec for s in self._slots])
        by_name = {s.spec.name: s for s in self._slots}
        for group in order:
            slots = [by_name[spec.name] for spec in group]
            live = [s for s in slots if s.child.popen is not None and s.child.alive]
            for slot in live:
                slot.state = ProcessState.STOPPING
                slot.child.signal_group(signal.SIGTERM)
            self._publish()
            deadline = time.monotonic() + self.grace_s
            for slot in slots:
                if slot.child.popen is not None:
                    slot.exit_code = slot.child.wait_stopped(deadline)
                if slot.state is not ProcessState.FAILED:
                    slot.state = ProcessState.STOPPED
                slot.ready = False
                slot.restart_at = None
        self._publish()

    # --- status -------------------------------------------------------------------------
    def _build_status(self) -> GraphStatus:
        return GraphStatus(
            name=self.plan.name, namespace=self.plan.namespace, run_dir=str(self.run_dir.path),
            endpoint=self.plan.endpoint, model_name=self.plan.model_name,
            supervisor_pid=os.getpid(), supervisor_create_time=self._own_create_time,
            phase=self._phase, started_at=self._started_wall, ready_after_s=self._ready_after,
            error=self.error,
            processes=[ProcessStatus(
                name=s.spec.name, kind=s.spec.kind.value, pid=s.child.pid,
                create_time=s.child.create_time, state=s.state, ports=dict(s.spec.ports),
                restarts=s.restarts, ready=s.ready, exit_code=s.exit_code)
                for s in self._slots])

    def _publish(self) -> None:
        # Called every poll: compare a cheap signature, build and write only on a change.
        signature = (self._phase, self.error, self._ready_after, tuple(
            (s.state, s.ready, s.restarts, s.child.pid, s.exit_code) for s in self._slots))
        if signature != self._signature:
            self._signature = signature
            self.snapshot = self._build_status()
            self.run_dir.write_state(self.snapshot)


def stop_order(specs: list[ProcessSpec]) -> list[list[ProcessSpec]]:
    """Groups stopped one after the other; the processes of a group are stopped together."""
    rank = {ProcessKind.FRONTEND: 0, ProcessKind.WORKER: 1, ProcessKind.NATS: 2,
            ProcessKind.ETCD: 3}
    groups: dict[int, list[ProcessSpec]] = {}
    for spec in specs:
        groups.setdefault(rank[spec.kind], []).append(spec)
    return [list(reversed(groups[r])) for r in sorted(groups)]
