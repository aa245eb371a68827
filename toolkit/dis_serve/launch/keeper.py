"""The keeper: a small process that runs a supervisor in a forked child and forks a new one
when it dies any other way than a stop or a failure. Both kinds of supervisor have one:
the detached `up --detach` (daemon.py) and each node's agent on hosts and Slurm (agent.py).

Why a keeper: a SIGKILLed supervisor took its processes with it (its children die with it,
PR_SET_PDEATHSIG, process.py), and nothing brought it back. The keeper is a loop with no
threads and no I/O but waiting: when its supervisor dies any other way than exiting 0 or 1
(a signal, a bug), it stops whatever the dead one left (orphans.py, from the state file)
and forks a new supervisor, which starts the same prepared plan again in the same run
directory (etcd and NATS find their data again). On the demo graph that is one bring-up,
about 2 s, within the 10 s rule. Its own crash budget (SUPERVISOR_RESTART) keeps a
supervisor that dies on every start from looping. Stop signals to the keeper (`down`,
scancel, Ctrl-C) are forwarded to the supervisor; the keeper exits with its status.

Why not adopt the running children instead: they would have to outlive their supervisor
(no PR_SET_PDEATHSIG, so nothing kills them when everything above them is SIGKILLed), and a
process that did not spawn them cannot wait for them, only poll pids; a supervisor restart
that re-starts everything needs neither, and kills nothing that could be left behind. Its
cost is one bring-up: seconds for the mocker, minutes for a TensorRT-LLM model that loads
its weights again. The keeper itself is the one process whose SIGKILL is not healed: the
supervisor serves on without it, only no longer restarted.

Forking (not a fresh `python -m ...`) saves an interpreter start and the imports; it is
safe because the keeper has started no thread.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable

from ..topology import Restart
from .orphans import kill_leftovers
from .restart_policy import GiveUp, RestartTracker
from .rundir import RunDir
from .status import GraphPhase

POLL_S = 0.02
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what `down` and a shell send
# A supervisor that keeps dying is given up after 5 deaths in a minute (a bug, or something
# that kills it on sight); the first restart is at once: its processes are down meanwhile.
SUPERVISOR_RESTART = Restart(backoff_base_s=0.1, backoff_cap_s=5.0, max_failures=5,
                             window_s=60.0, retry_given_up_s=None)
# The supervisor's exit status when it raised (not 0: stopped, nor 1: the graph failed),
# so the keeper starts another.
SUPERVISOR_BUG = 70


class _Keeper:
    """The keeper's state: the supervisor it waits for, and whether it was told to stop."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.child = 0
        self.stopping = False

    def on_signal(self, *_: object) -> None:
        self.stopping = True
        if self.child and os.getpid() == self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child, signal.SIGTERM)


def keep_supervised(run_dir: RunDir, supervise: Callable[[], int]) -> int:
    """Run `supervise` (it returns the supervisor's exit status: 0 stopped, 1 failed) in a
    forked child, and again in a new one whenever that child dies any other way; the
    supervisor's exit status once it ends for good. `run_dir`'s state file says what a dead
    supervisor left running. `supervise` must call `unblock_stop_signals` once its own
    handlers are set."""
    keeper = _Keeper()
    for sig in STOP_SIGNALS:
        signal.signal(sig, keeper.on_signal)
    tracker = RestartTracker(SUPERVISOR_RESTART)
    while True:
        keeper.child = _fork_supervisor(supervise)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        if keeper.stopping:  # told to stop before this supervisor existed
            keeper.on_signal()
        _, status = os.waitpid(keeper.child, 0)
        code = os.waitstatus_to_exitcode(status)
        if code in (0, 1):
            return code
        if keeper.stopping:
            return 0
        what = (f"was killed by {signal.Signals(-code).name}" if code < 0
                else f"exited with status {code}")
        decision = tracker.exited(time.monotonic(), what)
        left = kill_leftovers(state) if (state := run_dir.read_state()) else []
        cleaned = f" (stopped what it left: {', '.join(i.name for i in left)})" if left else ""
        if isinstance(decision, GiveUp):
            print(f"the supervisor (pid {keeper.child}) {decision.why}{cleaned}", flush=True)
            if state is not None:
                run_dir.write_state(state.model_copy(update={
                    "phase": GraphPhase.FAILED, "error": f"the supervisor {decision.why}"}))
            return 1
        print(f"the supervisor (pid {keeper.child}) {what}{cleaned}; starting another in "
              f"{decision.delay_s:g} s", flush=True)
        deadline = time.monotonic() + decision.delay_s
        while not keeper.stopping and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if keeper.stopping:
            return 0
        tracker.restarting()


def _fork_supervisor(supervise: Callable[[], int]) -> int:
    """Fork a supervisor. Stop signals are held back across the fork: the parent gets them
    once it knows the child to forward them to, the child once its own handlers are set
    (`unblock_stop_signals`), so none is lost in between."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid != 0:
        return pid  # the caller unblocks once it has recorded the pid
    code = SUPERVISOR_BUG
    try:
        code = supervise()
    except BaseException:  # the child must never return into the keeper's code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def unblock_stop_signals() -> None:
    """In the supervisor, once its handlers are set: the stop signals the fork held back."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
