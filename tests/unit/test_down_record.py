"""`down` leaves an honest record: a supervisor that had to be killed mid-stop (it ignored
SIGTERM past down's wait) never wrote its stop, so `down` writes it; and it leaves nothing
behind: the balancer's own directory goes once no one owns it."""

from __future__ import annotations

import subprocess
import sys

from dis_serve.launch.node_data import claim_data_dir, lock_file
from dis_serve.launch.process import create_time
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus
from dis_serve.placements.local.stop import stop_run

DEAF = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print(1, flush=True); time.sleep(60)")


def test_a_supervisor_killed_mid_stop_is_recorded_stopped_by_down(tmp_path):
    run = RunDir(tmp_path / "runs" / "deaf")
    run.prepare()
    deaf = subprocess.Popen([sys.executable, "-c", DEAF], stdout=subprocess.PIPE)
    try:
        deaf.stdout.readline()  # its SIGTERM handler is set
        run.write_state(GraphStatus(
            name="deaf", namespace="dis-serve-deaf", run_dir=str(run.path),
            endpoint="http://127.0.0.1:1", model_name="m", supervisor_pid=deaf.pid,
            supervisor_create_time=create_time(deaf.pid), phase=GraphPhase.READY,
            started_at=1.0, processes=[]))
        result = stop_run(run, timeout_s=0.5)
    finally:
        deaf.kill()
        deaf.wait()
    assert run.read_state().phase is GraphPhase.STOPPED
    assert result.had_supervisor and result.unrecorded and not result.stale
    assert "deaf: its supervisor ended without recording the stop; marked stopped" in \
        result.describe()


def test_down_removes_the_balancers_directory_once_no_one_owns_it(tmp_path):
    run = RunDir(tmp_path / "runs" / "gone")
    run.prepare()
    own = tmp_path / "dis-serve-me" / "gone@machine"
    claim = claim_data_dir(own, "gone")
    stop_run(run, balancer_dir=own)
    assert own.is_dir()  # a live supervisor's: it removes the directory itself
    claim.forget()  # as a killed supervisor's: the lock dies with its last holder
    stop_run(run, balancer_dir=own)
    assert not own.exists() and not lock_file(own).exists()
