"""Stop a local graph from any shell: its supervisor (and whoever holds its lock) is asked
to stop and waited for; whatever a dead supervisor left is stopped by pid; what its
namespace left on a shared etcd/NATS is removed, and so is the balancer's own directory
once no one owns it (launch/node_data.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from ...errors import RunError
from ...launch.node_data import remove_unowned
from ...launch.orphans import Leftover, kill_leftovers, supervisor_alive
from ...launch.run_lock import lock_holder
from ...launch.rundir import RunDir
from ...launch.status import GraphPhase, GraphStatus, ProcessState
from ...launch.stopping import stop_processes

POLL_S = 0.1


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


def stop_run(run: RunDir, timeout_s: float = 60.0, *,
             balancer_dir: Path | None = None) -> StopResult:
    """Ask the graph's supervisor to stop it (SIGTERM) and wait; clean up whatever remains
    (everything, when the supervisor is gone), `balancer_dir` (the run record's) included."""
    try:
        return _stop(run, timeout_s)
    finally:
        if balancer_dir is not None:
            remove_unowned(balancer_dir)  # its owners have stopped, or it stays theirs


def _stop(run: RunDir, timeout_s: float) -> StopResult:
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
    from ...coordination.shared_planes import clean_shared

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
