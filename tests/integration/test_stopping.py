"""The one stop routine: polite signal, grace period, SIGKILL, for whole process groups."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from dis_serve.launch.stopping import group_members, stop_processes

pytestmark = pytest.mark.integration

# A group leader that ignores SIGTERM and has a child in its group that does not.
_STUBBORN_PARENT = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
print("ready", flush=True)
time.sleep(300)
"""


def _start(code: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace_period():
    proc = _start(_STUBBORN_PARENT)
    try:
        start = time.monotonic()
        codes = stop_processes([proc.pid], grace_s=0.5)
        took = time.monotonic() - start
        assert codes[proc.pid] == -signal.SIGKILL
        assert group_members(proc.pid) == []
        assert 0.5 <= took < 5
    finally:
        proc.kill()
        proc.stdout.close()


def test_a_process_that_honours_sigterm_ends_without_waiting_out_the_grace_period():
    proc = _start("import time; print('ready', flush=True); time.sleep(300)")
    try:
        start = time.monotonic()
        codes = stop_processes([proc.pid], grace_s=30)
        assert codes[proc.pid] == -signal.SIGTERM
        assert time.monotonic() - start < 5
    finally:
        proc.kill()
        proc.stdout.close()
