"""Find and stop processes a dead supervisor left behind, from the pids in its run directory.

A recorded pid is ours only if its create time still matches: the kernel reuses pids. Every
child led its own process group (new session), so its group id is its pid. While any member
of a group lives, Linux does not hand that number out as a new pid, so members of a group
whose leader is gone are still leftovers of our child.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import PreflightError
from .process import create_time, same_process
from .status import GraphStatus, ProcessStatus
from .stopping import group_members, stop_processes

if TYPE_CHECKING:
    from .rundir import RunDir


@dataclass(frozen=True)
class Leftover:
    name: str
    pids: tuple[int, ...]


def leftovers(status: GraphStatus) -> list[Leftover]:
    """Processes of the recorded graph that are still running, in stop order."""
    found = []
    procs = sorted(status.processes, key=lambda p: p.kind.stop_rank)
    for proc in procs:
        pids = _leftover_pids(proc)
        if pids:
            found.append(Leftover(proc.name, tuple(pids)))
    return found


def _leftover_pids(proc: ProcessStatus) -> list[int]:
    if proc.pid is None:
        return []
    leader_now = create_time(proc.pid)
    if leader_now is not None and not same_process(proc.pid, proc.create_time):
        return []  # the pid belongs to someone else now, and so does any group it leads
    return [member.pid for member in group_members(proc.pid)]


def kill_leftovers(status: GraphStatus, grace_s: float = 5.0) -> list[Leftover]:
    """SIGTERM each leftover group in stop order, SIGKILL what outlives the grace period."""
    found = leftovers(status)
    for item in found:
        pgid = status.process(item.name).pid
        assert pgid is not None
        stop_processes([pgid], grace_s)
    return found


def supervisor_alive(status: GraphStatus) -> bool:
    return same_process(status.supervisor_pid, status.supervisor_create_time)


def claim(run: RunDir) -> list[Leftover]:
    """Before a local `up`: refuse a graph that is running; stop what a dead supervisor
    left behind."""
    status = run.read_state()
    if status is None:
        return []
    if supervisor_alive(status) and not status.phase.finished:
        raise PreflightError(
            f"graph {status.name!r} is already running (supervisor pid {status.supervisor_pid}, "
            f"{status.endpoint}); stop it with `dis-serve down {status.name}` or give this "
            "graph another name")
    return kill_leftovers(status)
