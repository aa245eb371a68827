"""Is anyone behind a registration? Its request server must accept connections; for our own
graphs, the process that listens there is named and its health probe asked too."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psutil

from .observed import Registration
from .probes import process_ready, tcp_accepts

if TYPE_CHECKING:
    import httpx

    from ..render.launch_plan import LaunchPlan


def listeners() -> dict[int, int]:
    """TCP port -> pid of the process listening on it (this machine)."""
    found = {}
    for conn in psutil.net_connections(kind="tcp"):
        if conn.status == psutil.CONN_LISTEN and conn.pid is not None:
            found[conn.laddr.port] = conn.pid
    return found


def check(registrations: list[Registration], client: httpx.Client,
          plan: LaunchPlan | None = None, pids: dict[int, str] | None = None
          ) -> list[Registration]:
    """The registrations with `reachable` (and, for our graph, whose processes are `pids`:
    pid -> process name, `process` and `healthy`) set."""
    owners = listeners() if pids else {}
    by_pid = pids or {}
    checked = []
    for reg in registrations:
        if reg.address is None:
            checked.append(reg)
            continue
        host, _, port = reg.address.rpartition(":")
        update: dict = {"reachable": tcp_accepts(int(port), host)}
        name = by_pid.get(owners.get(int(port), -1))
        if name is not None and plan is not None:
            update["process"] = name
            update["healthy"] = process_ready(client, plan.process(name), plan)
        checked.append(reg.model_copy(update=update))
    return checked
