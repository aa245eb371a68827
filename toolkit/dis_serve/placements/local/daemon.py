"""The detached supervisor behind `dis-serve up --detach`, and the keeper that restarts it.

`up` runs preflight and prepares the run directory in its own process (so bad input fails
fast with exit 2), then forks the keeper: it leaves the terminal's session, sends its output
to `logs/supervisor.log`, and forks the supervisor, which supervises the graph until
SIGTERM/SIGINT/SIGHUP or failure and exits 0 after a requested stop, 1 after a failure. The
parent returns once `state.json` says ready. Forking (not a fresh `python -m ...`) saves an
interpreter start and the imports, about 0.3 s of every detached bring-up; it is safe
because nothing in `up` has started a thread by then, nor has the keeper.

The keeper (keeper.py, shared with the node agents) restarts a supervisor that dies any
other way than a stop or a failure; keeper.py says why it restarts everything rather than
adopting the running children. Here it holds the graph's lock (run_lock.py) and its pid is
in the lock file, so `down` signals it (and the supervisor). It also holds the balancer's
own directory (launch/node_data.py) and removes it when it ends for good; a supervisor that
outlived a killed keeper removes it when it ends.
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

from ...errors import RunError
from ...launch.events import SupervisorEvent, describe
from ...launch.graph import PreparedRun, prepare_run
from ...launch.keeper import STOP_SIGNALS, keep_supervised, unblock_stop_signals
from ...launch.node_data import DataDirClaim, remove_unowned
from ...launch.plan_watch import PlanWatch
from ...launch.rundir import DEFAULT_KEEP_RUNS, RunDir
from ...launch.secrets import graph_secrets
from ...launch.startup_budget import readiness_timeout_s
from ...launch.status import GraphPhase, GraphStatus
from ...launch.supervisor import Supervisor
from ...topology import Topology

POLL_S = 0.02
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
        _daemon_main(run_dir, ready_timeout_s, prepared.balancer_claim)  # never returns
    claim = prepared.balancer_claim
    try:
        return _wait_ready(run_dir, pid, ready_timeout_s + STOP_MARGIN_S), prepared
    except KeyboardInterrupt:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        raise
    finally:
        if prepared.lock is not None:
            prepared.lock.forget()  # the supervisor holds it on
        if claim is not None:
            claim.forget()  # the keeper holds it on and removes it when it ends
            remove_unowned(claim.path)  # held by no one: the start failed, or its keeper died


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


def _daemon_main(run_dir: RunDir, ready_timeout_s: float,
                 claim: DataDirClaim | None) -> None:
    code = 1
    keeper = os.getpid()

    def supervise_once() -> int:
        status = supervise(run_dir, ready_timeout_s)
        if claim is not None and os.getppid() != keeper:  # no keeper left to remove it
            claim.release()
        return status

    try:
        os.setsid()
        _redirect_stdio(run_dir.supervisor_log)
        code = keep_supervised(run_dir, supervise_once)
    except BaseException:  # the child must never return into the CLI's code
        traceback.print_exc()
    finally:
        if claim is not None:  # the graph has stopped for good
            with contextlib.suppress(OSError):
                claim.release()
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


def _log_event(event: SupervisorEvent) -> None:
    """One line in supervisor.log; a log that cannot be written (a full disk) costs the
    line, never the supervision."""
    with contextlib.suppress(OSError):
        print(describe(event), flush=True)


def supervise(run_dir: RunDir, ready_timeout_s: float) -> int:
    """Run the prepared plan in `run_dir` until asked to stop; the process's exit status."""
    supervisor = Supervisor(run_dir.read_plan(), run_dir, ready_timeout_s=ready_timeout_s,
                            on_event=_log_event,
                            secrets=graph_secrets(run_dir.read_topology(),
                                                  run_dir.path.resolve()),
                            plan_source=PlanWatch(run_dir.plan_file, run_dir.read_plan))
    for sig in STOP_SIGNALS:
        signal.signal(sig, lambda *_: supervisor.request_stop())
    unblock_stop_signals()  # held back by the keeper's fork
    thread = threading.Thread(target=supervisor.run, name="supervisor")
    thread.start()
    # Wait in short slices: the main thread must stay responsive to signals. A supervisor
    # thread that died without finishing took its children with it (pdeathsig): exit too.
    while not supervisor.finished.wait(0.5) and thread.is_alive():
        pass
    thread.join()
    return 1 if supervisor.error else 0
