"""When a process that runs is not doing its job: pure decisions, fed with probe results and
a monotonic clock the caller reads; the supervisor does the I/O they decide.

- Hung: a process whose liveness probe goes unanswered (hung, not merely "notready") is
  `degraded` from the first miss and restarted, like a crash, after enough misses in a row:
  a worker after `liveness.failures`; etcd and NATS after twice that, because everything
  holds a connection to them (a plane that stalls a few seconds under load, an fsync or a
  leader election, costs less than every client reconnecting), yet a plane that stays hung
  (SIGSTOP, a deadlock) stops the whole graph from routing and must not be left so. The
  frontend never: under load its /v1/models can be slow while it serves, and a restart
  drops every request in flight.
- Lost registrations: etcd forgot workers that still run and answer ready (its data
  directory deleted, then etcd restarted empty: their leases are gone, and Dynamo 1.6.1
  workers do not register again). The router then sees fewer workers of a type than are
  ready. A short grace first (a worker just ready registers a moment later, and a restarted
  etcd gets its keys back from the workers' lease keep-alives when its data survived); past
  it, the workers of that type, and of any other type short by then, are restarted at
  once, so they register again. Which of a type's workers the router lost is not known
  (it counts them), so all of that type's ready workers are restarted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..topology import Liveness, ProcessKind

# Seconds the router may see fewer workers than are ready before they are restarted.
LOST_REGISTRATION_GRACE_S = 3.0


def unanswered_before_restart(kind: ProcessKind, liveness: Liveness) -> int | None:
    """Unanswered liveness probes in a row that get a running process restarted as hung
    (None: never)."""
    if kind is ProcessKind.WORKER:
        return liveness.failures
    if kind.is_coordination:
        return 2 * liveness.failures
    return None


@dataclass
class RegistrationWatch:
    """Watches, per worker type, how many workers the router sees against how many run and
    answer ready; says which types lost their registrations for longer than the grace."""

    grace_s: float = LOST_REGISTRATION_GRACE_S
    short_since: dict[str, float] = field(default_factory=dict)

    def observe(self, now: float, seen: dict[str, int], ready: dict[str, int]) -> list[str]:
        """The router's counts and the ready workers' at `now`; the worker types whose
        workers should be restarted now (each reported once per shortfall)."""
        short = [t for t, count in ready.items() if seen.get(t, 0) < count]
        for worker_type in [t for t in self.short_since if t not in short]:
            del self.short_since[worker_type]
        for worker_type in short:
            self.short_since.setdefault(worker_type, now)
        if not any(now - since >= self.grace_s for since in self.short_since.values()):
            return []
        # One type short past the grace proves the loss; the others short now lost theirs
        # too (the router drops each as its lease runs out, not all at once).
        self.short_since.clear()  # their restart ends this shortfall; a new one starts anew
        return short

    def reset(self) -> None:
        """Forget any shortfall (the frontend, which the router lives in, restarted)."""
        self.short_since.clear()
