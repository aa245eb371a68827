"""One owner per graph name: an exclusive lock on `runs/<name>.lock`, held from before `up`
touches the run directory until its supervisor has stopped everything.

Why a lock and not the state file: two `up` of one name at once both found no live
supervisor in `state.json` (none had written one yet), both cleaned the run directory (one
deleted the other's etcd `wal` under it) and split the processes between two supervisors.
`flock` is atomic, and the kernel drops it when its holder dies, however it dies, so a
stale lock cannot outlive its owner.

- The lock sits beside the run directory, not in it: `rm -rf` of a running graph's run
  directory (which the supervisor survives) must not let a second `up` in.
- The file holds the holder's pid, for the loser's message and for `down`: a graph that is
  still starting has no state file yet, but its lock already names whom to stop.
- `up --detach` forks: the child inherits the lock's open file description, so the lock
  is never free between the two; the parent then closes its copy without unlocking.
- Children of the supervisor do not inherit it (they are spawned with `close_fds`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from ..errors import PreflightError
from .rundir import PRIVATE_DIR, PRIVATE_FILE, RunDir


def lock_path(run: RunDir) -> Path:
    return run.path.parent / f"{run.name}.lock"


class RunLock:
    """The held lock of one graph name (closing its descriptor everywhere releases it)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, run: RunDir) -> RunLock:
        """Take the lock, or PreflightError naming who holds it (a graph starting or
        running under this name)."""
        path = lock_path(run)
        # The run directory too: `down` (no name) lists graphs by their directories.
        run.path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"pid {holder}" if holder else "another dis-serve"
            raise PreflightError(
                f"graph {run.name!r} is already starting or running ({who} holds "
                f"{path}); stop it with `dis-serve down {run.name}` or give this graph "
                "another name") from None
        lock = cls(path, fd)
        lock.record_holder()
        return lock

    def record_holder(self, pid: int | None = None) -> None:
        """Write who holds it now (the detached supervisor, once forked)."""
        assert self._fd is not None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{pid or os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        """Unlock (for every process sharing it) and close."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def forget(self) -> None:
        """Close this process's descriptor without unlocking: another process (the forked
        supervisor) holds the same lock on."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lock_holder(run: RunDir) -> int | None:
    """The pid holding the graph's lock (a supervisor, or an `up` still preparing), or
    None when nobody holds it."""
    return holder_of(lock_path(run))


def holder_of(path: Path) -> int | None:
    """The pid holding the lock file `path` (-1 if held but not yet named), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd) or -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
