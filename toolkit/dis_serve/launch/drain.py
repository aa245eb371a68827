"""Drain a process that leaves a running graph, without blocking the supervisor's loop.

SIGTERM to its group is how Dynamo 1.6.1 takes a worker out of routing: its runtime
withdraws readiness and unregisters the endpoint from discovery at once, the router stops
picking it, and the process exits once its in-flight requests complete (measured here: a
mocker decode worker with 8 streams in flight unregistered at once, finished them in 1.7 s
and exited 2.6 s after the signal, 0 failed). A TensorRT-LLM worker waits 5 s more first
(DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS), a prefill one for its KV transfers too. Past the
drain timeout the group gets SIGKILL; the frontend's --migration-limit moves what was still
streaming to another worker (measured: SIGKILL 0.3 s after SIGTERM mid-stream, 8 of 8 in-flight
requests completed elsewhere).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass

from .process import ChildProcess
from .stopping import group_members, signal_group


@dataclass
class Drain:
    child: ChildProcess
    deadline: float
    killed: bool = False
    exit_code: int | None = None

    @classmethod
    def start(cls, child: ChildProcess, timeout_s: float) -> Drain:
        assert child.pid is not None
        signal_group(child.pid, signal.SIGTERM)
        return cls(child=child, deadline=time.monotonic() + timeout_s)

    def done(self) -> bool:
        """Whether the process and its group are gone (SIGKILL once past the deadline)."""
        assert self.child.pid is not None
        code = self.child.poll()
        if code is not None and not group_members(self.child.pid):
            self.exit_code = code
            return True
        if time.monotonic() > self.deadline and not self.killed:
            signal_group(self.child.pid, signal.SIGKILL)
            self.killed = True
        return False
