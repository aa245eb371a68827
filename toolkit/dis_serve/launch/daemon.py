"""The detached supervisor behind `dis-serve up --detach`, and the keeper that restarts it.

`up` runs preflight and prepares the run directory in its own process (so bad input fails
fast with exit 2), then forks the keeper: it leaves the terminal's session, sends its output
to `logs/supervisor.log`, and forks the supervisor, which supervises the graph until
SIGTERM/SIGINT/SIGHUP or failure and exits 0 after a requested stop, 1 after a failure. The
parent returns once `state.json` says ready. Forking (not a fresh `python -m ...`) saves an
interpreter start and the imports, about 0.3 s of every detached bring-up; it is safe
because nothing in `up` has started a thread by then, nor has the keeper.

Why a keeper: a SIGKILLed supervisor took the whole graph with it (its children die with
it, PR_SET_PDEATHSIG, process.py), and nothing brought it back. The keeper is a small loop
with no threads and no I/O but waiting: when its supervisor dies any other way than exiting
0 or 1 (a signal, a bug), it stops whatever the dead one left (orphans.py) and forks a new
supervisor, which starts the same prepared plan again in the same run directory (etcd and
NATS find their data again). On the demo graph that is one bring-up, about 2 s, within the
10 s rule. Its own crash budget (SUPERVISOR_RESTART, restart_policy.py) keeps a supervisor
that dies on every start from looping. It holds the graph's lock (run_lock.py) and its pid
is in the lock file, so `down` signals it (and the supervisor); it forwards the signal and
exits with the supervisor's status.

Why not adopt the running children instead: they would have to outlive their supervisor
(no PR_SET_PDEATHSIG, so nothing kills them when everything above them is SIGKILLed), and a
process that did not spawn them cannot wait for them, only poll pids; a supervisor restart
that re-starts everything needs neither, and kills nothing that could be left behind. Its
cost is one bring-up: seconds for the mocker, minutes for a TensorRT-LLM model that loads
its weights again. The keeper itself is the one process whose SIGKILL is not healed: the
supervisor serves on without it (it holds the lock too), only no longer restarted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path

from ..errors import RunError
from ..startup_budget import readiness_timeout_s
from ..topology import Restart, Topology
from .events import describe
from .graph import PreparedRun, prepare_run
from .orphans import kill_leftovers
from .restart_policy import GiveUp, RestartTracker
from .rundir import DEFAULT_KEEP_RUNS, RunDir
from .secrets import graph_secrets
from .status import GraphPhase, GraphStatus
from .supervisor import Supervisor

POLL_S = 0.02
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)  # what `down` and a shell send
# A supervisor that keeps dying is given up after 5 deaths in a minute (a bug, or something
# that kills it on sight); the first restart is at once: the graph is down meanwhile.
SUPERVISOR_RESTART = Restart(backoff_base_s=0.1, backoff_cap_s=5.0, max_failures=5,
                             window_s=60.0, retry_given_up_s=None)
# The supervisor's exit status when it raised (not 0: stopped, nor 1: the graph failed),
# so the keeper starts another.
SUPERVISOR_BUG = 70
# Past the readiness budget, the supervisor stops what it started before it reports failure.
STOP_MARGIN_S = 60.0


def start_detached(topo: Topology, *, run_root: Path | None = None,
                   ready_timeout_s: float | None = None,
                   keep_runs: int = DEFAULT_KEEP_RUNS) -> tuple[GraphStatus, PreparedRun]:
    """Start the graph under a detached supervisor; return its status once ready (default
    budget: the workers' startup budget for the backend and model). RunError (with the
    supervisor's reason) if the graph fails before that."""
    ready_timeout_s = readiness_timeout_s(topo, ready_timeout_s)
    prepared = prepare_run(topo, run_root, keep_runs=keep_runs)
    run_dir = prepared.run_dir
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        if prepared.lock is not None:
            prepared.lock.record_holder()  # `down` now signals the supervisor
        _daemon_main(run_dir, ready_timeout_s)  # never returns
    try:
        return _wait_ready(run_dir, pid, ready_timeout_s + STOP_MARGIN_S), prepared
    except KeyboardInterrupt:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        raise
    finally:
        if prepared.lock is not None:
            prepared.lock.forget()  # the supervisor holds it on


def _wait_ready(run_dir: RunDir, pid: int, timeout_s: float) -> GraphStatus:
    deadline = time.monotonic() + timeout_s
    while True:
        # Any record is this run's (prepare_run archived the last one); its supervisor is
        # the keeper's child, or a later one if the first was killed.
        status = run_dir.read_state()
        if status is not None:
            if status.phase is GraphPhase.READY:
                return status
            if status.phase is GraphPhase.FAILED:
                os.waitpid(pid, 0)
                raise RunError(status.error or "the graph failed")
            if status.phase is GraphPhase.STOPPED:
                os.waitpid(pid, 0)
                raise RunError(f"{status.name} was stopped (`dis-serve down`, or a signal to "
                               f"its supervisor) before it was ready; nothing of it runs")
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            tail = "\n".join("  " + line for line in run_dir.tail("supervisor"))
            raise RunError(f"the supervisor exited (status {os.waitstatus_to_exitcode(code)}) "
                           f"before the graph was ready; {run_dir.supervisor_log}:\n{tail}")
        if time.monotonic() > deadline:
            # The supervisor enforces the readiness budget itself; past it and the margin
            # for stopping, it is stuck: stop it rather than wait for ever.
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
            raise RunError(f"the supervisor (pid {pid}) neither became ready nor failed within "
                           f"{timeout_s:g} s; {run_dir.supervisor_log} says why")
        time.sleep(POLL_S)


def _daemon_main(run_dir: RunDir, ready_timeout_s: float) -> None:
    code = 1
    try:
        os.setsid()
        _redirect_stdio(run_dir.supervisor_log)
        code = keep_supervised(run_dir, ready_timeout_s)
    except BaseException:  # the child must never return into the CLI's code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


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


def keep_supervised(run_dir: RunDir, ready_timeout_s: float) -> int:
    """Run a supervisor for the prepared plan, and a new one whenever it dies any other way
    than a stop or a failure; the supervisor's exit status once it ends for good."""
    keeper = _Keeper()
    for sig in STOP_SIGNALS:
        signal.signal(sig, keeper.on_signal)
    tracker = RestartTracker(SUPERVISOR_RESTART)
    while True:
        keeper.child = _fork_supervisor(run_dir, ready_timeout_s)
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


def _fork_supervisor(run_dir: RunDir, ready_timeout_s: float) -> int:
    """Fork a supervisor. Stop signals are held back across the fork: the parent gets them
    once it knows the child to forward them to, the child once its own handlers are set
    (`supervise`), so none is lost in between."""
    sys.stdout.flush()
    sys.stderr.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    pid = os.fork()
    if pid != 0:
        return pid  # the caller unblocks once it has recorded the pid
    code = SUPERVISOR_BUG
    try:
        code = supervise(run_dir, ready_timeout_s)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _redirect_stdio(log: Path) -> None:
    # Let go of the terminal and of any pipe the caller reads `up`'s output from.
    devnull = os.open(os.devnull, os.O_RDONLY)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(devnull, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(devnull)
    os.close(out)


def supervise(run_dir: RunDir, ready_timeout_s: float) -> int:
    """Run the prepared plan in `run_dir` until asked to stop; the process's exit status."""
    supervisor = Supervisor(run_dir.read_plan(), run_dir, ready_timeout_s=ready_timeout_s,
                            on_event=lambda event: print(describe(event), flush=True),
                            secrets=graph_secrets(run_dir.read_topology(),
                                                  run_dir.path.resolve()))
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: supervisor.request_stop())
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # held back by the keeper's fork
    thread = threading.Thread(target=supervisor.run, name="supervisor")
    thread.start()
    # Wait in short slices: the main thread must stay responsive to signals. A supervisor
    # thread that died without finishing took its children with it (pdeathsig): exit too.
    while not supervisor.finished.wait(0.5) and thread.is_alive():
        pass
    thread.join()
    return 1 if supervisor.error else 0
