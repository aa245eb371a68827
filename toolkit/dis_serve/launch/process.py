"""One supervised child process: spawn it in its own process group, stop the whole group.

Every child gets a new session (so a signal to its group reaches whatever it spawns and
nothing else) and, on Linux, PR_SET_PDEATHSIG: the kernel kills it when the thread that
spawned it dies, even if the supervisor is SIGKILLed and never runs its shutdown. Children
must therefore be spawned from a thread that lives as long as they do (the supervisor's).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from ..render.launch_plan import ProcessSpec

_PR_SET_PDEATHSIG = 1
DEFAULT_GRACE_S = 10.0
# Loaded here, not in the child: between fork and exec only async-signal-safe work is safe.
_prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform == "linux" else None


def _die_with_parent(parent_pid: int) -> None:
    """Runs in the child between fork and exec (so: nothing that allocates locks)."""
    assert _prctl is not None
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died between fork and prctl; then nobody would ever signal us.
    if os.getppid() != parent_pid:
        os._exit(1)


def parent_death_preexec() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGKILL the child when the spawning thread dies
    (None where Linux's prctl is missing): for children in a session of their own, which no
    signal to our process group reaches."""
    if _prctl is None:
        return None
    parent = os.getpid()
    return lambda: _die_with_parent(parent)


def create_time(pid: int) -> float | None:
    """The process's start time, or None if it is gone (a zombie counts as gone). Together
    with the pid it names one process: a pid the kernel later reuses has a later create time."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def same_process(pid: int, recorded_create_time: float | None) -> bool:
    if recorded_create_time is None:
        return False
    now = create_time(pid)
    return now is not None and abs(now - recorded_create_time) < 0.05


class ChildProcess:
    """A process from the launch plan, started and stopped by the supervisor."""

    def __init__(self, spec: ProcessSpec, log_path: Path,
                 secret_env: dict[str, str] | None = None) -> None:
        self.spec = spec
        self.log_path = log_path
        # Secrets (launch/secrets.py) reach the child through its environment only.
        self.secret_env = dict(secret_env or {})
        self.popen: subprocess.Popen[bytes] | None = None
        self.create_time: float | None = None
        self.started_at: float | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def start(self) -> None:
        env = os.environ | self.spec.env | self.secret_env
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "ab") as log:
            log.write(f"--- dis-serve: starting {self.name}: {' '.join(self.spec.argv)}\n"
                      .encode())
            log.flush()
            preexec = parent_death_preexec()
            # umask 077: what a child writes (etcd's and NATS's data, caches) is private too.
            self.popen = subprocess.Popen(
                self.spec.argv, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=preexec,
                close_fds=True, umask=0o077)
        self.started_at = time.monotonic()
        self.create_time = create_time(self.popen.pid)

    def poll(self) -> int | None:
        """Exit status if the process has exited, else None (also None before start)."""
        return self.popen.poll() if self.popen else None

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def exit_status(self, reaped: dict[int, int]) -> int | None:
        """The exit status once stopped: from `reaped` (what stopping.stop_processes
        reaped), else reaped here (a child that had exited before the stop)."""
        if self.popen is None:
            return None
        if self.popen.pid in reaped:
            return reaped[self.popen.pid]
        return self.popen.wait()
