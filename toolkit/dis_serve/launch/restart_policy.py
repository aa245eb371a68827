"""When a process that exited starts again: a pure state machine per process, fed with what
happened and the time it happened (a monotonic clock the caller reads), answering what to
do. The supervisor does the I/O it decides; tests drive it with a fake clock.

- An exit restarts the process after its backoff: `backoff_base_s`, doubled for each further
  exit in a row, at most `backoff_cap_s`; being ready again resets the doubling.
- `max_failures` exits within `window_s` give it up for now: it stays down, and (when
  `retry_given_up_s` is set) gets one more try that long after. A try that reaches ready
  restores its whole crash budget; one that exits first gives it up again at once, for
  another slow period. So an outage longer than the budget (a port held by someone else for
  minutes) costs one start per slow period, and ends by itself once the cause is gone.
- Restarts off: the first exit gives it up, with no slow retry.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from ..topology import Restart


@dataclass(frozen=True)
class RestartAfter:
    """Start it again at `at` (`delay_s` from the exit)."""

    delay_s: float
    at: float


@dataclass(frozen=True)
class GiveUp:
    """Leave it down; `retry_at` is when the slow clock tries it again (None: never)."""

    why: str
    retry_at: float | None


Decision = RestartAfter | GiveUp


@dataclass
class RestartTracker:
    """One process's restart state."""

    policy: Restart
    crashes: collections.deque[float] = field(default_factory=collections.deque)
    in_a_row: int = 0
    restart_at: float | None = None
    given_up: bool = False
    on_probation: bool = False  # started by the slow clock, not ready yet

    def exited(self, now: float, what: str) -> Decision:
        """It exited (or was stopped for hanging) at `now`; `what` says how."""
        policy = self.policy
        if not policy.enabled:
            return self._give_up(f"{what} and restarts are off for it", None)
        self.crashes.append(now)
        while self.crashes and now - self.crashes[0] > policy.window_s:
            self.crashes.popleft()
        retry_at = (now + policy.retry_given_up_s if policy.retry_given_up_s is not None
                    else None)
        if self.on_probation:
            return self._give_up(f"{what} again on its retry after giving up", retry_at)
        if len(self.crashes) >= policy.max_failures:
            return self._give_up(f"crashed {len(self.crashes)} times within "
                                 f"{policy.window_s:g} s (last: {what}); giving up", retry_at)
        self.in_a_row += 1
        delay = policy.delay(self.in_a_row)
        self.restart_at = now + delay
        return RestartAfter(delay_s=delay, at=self.restart_at)

    def _give_up(self, why: str, retry_at: float | None) -> GiveUp:
        self.given_up = True
        self.restart_at = retry_at
        return GiveUp(why=why, retry_at=retry_at)

    def due(self, now: float) -> bool:
        """A restart (after backoff, or on the slow clock) is due at `now`."""
        return self.restart_at is not None and now >= self.restart_at

    def restarting(self) -> bool:
        """The caller starts it now; True if this is the slow clock's try after giving up."""
        self.restart_at = None
        slow = self.given_up
        if slow:
            self.given_up = False
            self.on_probation = True
        return slow

    def ready(self) -> None:
        """It passed its readiness probe: the doubling starts over, and a try on the slow
        clock that got here has its whole crash budget back."""
        self.in_a_row = 0
        if self.on_probation:
            self.on_probation = False
            self.crashes.clear()
