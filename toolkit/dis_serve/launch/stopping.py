"""Stop processes the one way dis-serve stops anything: polite signals, a grace period, SIGKILL.

Every child dis-serve starts leads its own process group (a new session), so stopping it
means signalling the group: whatever it spawned goes too. psutil does the waiting.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence

import psutil

KILL_WAIT_S = 5.0
POLL_S = 0.05


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _signal_one(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _running(proc: psutil.Process) -> bool:
    # A zombie has ended: only its parent's wait is missing, which may never come when
    # the parent is an init that does not reap.
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """The running (not zombie) processes of a process group."""
    members = []
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and _running(proc):
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def _live(ids: Sequence[int], groups: bool) -> list[psutil.Process]:
    if groups:
        return [proc for pgid in ids for proc in group_members(pgid)]
    found = []
    for pid in ids:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return [proc for proc in found if _running(proc)]


def _wait_ended(procs: list[psutil.Process], grace_s: float) -> dict[int, int]:
    """Wait up to `grace_s` until every process has ended; psutil.wait_procs waits (and reaps
    our own children: their exit statuses, by pid, are returned)."""
    codes: dict[int, int] = {}
    deadline = time.monotonic() + grace_s
    while procs:
        slice_s = max(0.0, min(POLL_S, deadline - time.monotonic()))
        gone, procs = psutil.wait_procs(procs, timeout=slice_s)
        codes |= {proc.pid: proc.returncode for proc in gone if proc.returncode is not None}
        procs = [proc for proc in procs if _running(proc)]
        if time.monotonic() >= deadline:
            break
    return codes


def stop_processes(ids: Sequence[int], grace_s: float, *, groups: bool = True,
                   interrupt_grace_s: float | None = None) -> dict[int, int]:
    """Stop the processes `ids` (with `groups`: the process groups they lead), all at once.

    SIGINT first when `interrupt_grace_s` is given (a program's own cancel path), then
    SIGTERM; each is followed by its grace period, cut short once every process is gone;
    then SIGKILL to what is left. Returns the exit status of each of our own children that
    this reaped, by pid (a child that had already exited is left for its owner to reap).
    """
    send = signal_group if groups else _signal_one
    steps = [(signal.SIGTERM, grace_s), (signal.SIGKILL, KILL_WAIT_S)]
    if interrupt_grace_s is not None:
        steps.insert(0, (signal.SIGINT, interrupt_grace_s))
    codes: dict[int, int] = {}
    for sig, grace in steps:
        live = _live(ids, groups)
        if not live:
            break
        for target in ids:
            send(target, sig)
        codes |= _wait_ended(live, grace)
    return codes
