"""A doctor report as people read it (Rich renderables): the registrations table and the
router's line, shown by `dis-serve doctor` and by `dis-serve status`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table

if TYPE_CHECKING:
    from .doctor import DoctorReport
    from .observed import Registration


def registrations_table(report: DoctorReport) -> Table:
    """One row per worker registration: lease, liveness, the router's view, traffic."""
    from .findings import workers_of

    traffic = report.traffic
    served = {w.instance_id: w.requests for w in traffic.workers} if traffic else {}
    router = traffic.router_workers if traffic else {}
    table = Table(title=f"etcd {report.etcd.url}: {report.namespace}", title_justify="left")
    for column in ("component", "instance", "lease", "address", "process", "state", "router",
                   "requests"):
        table.add_column(column)
    for reg in sorted(workers_of(report.etcd), key=lambda r: (r.component, r.instance_id)):
        lease = (f"{reg.lease_left_s}/{reg.lease_ttl_s} s" if reg.lease_ttl_s is not None
                 else "?")
        table.add_row(*cells(reg.component, reg.instance_id, lease, reg.address or "-",
                              reg.process or "-", _state(reg), router.get(reg.instance_id, "-"),
                              str(served.get(reg.instance_id, "-"))))
    return table


def cells(*values: str) -> list:
    from rich.text import Text

    return [Text(v) for v in values]  # plain text: a message may contain [brackets]


def _state(reg: Registration) -> str:
    if reg.reachable is False:
        return "stale: unreachable"
    if reg.healthy is False:
        return "stale: unhealthy"
    return "live" if reg.reachable else "registered"


def router_line(report: DoctorReport) -> str:
    traffic = report.traffic
    expected = report.expected
    parts = []
    if expected is not None:
        live: dict[str, int] = {}
        for reg in report.etcd.registrations:
            if reg.endpoint == "generate" and not reg.stale:
                live[reg.component] = live.get(reg.component, 0) + 1
        parts.append("registered " + ", ".join(
            f"{c} {live.get(c, 0)}/{n}" for c, n in expected.workers.items()))
    if traffic is not None and traffic.error is None:
        kinds: dict[str, int] = {}
        for kind in traffic.router_workers.values():
            kinds[kind] = kinds.get(kind, 0) + 1
        seen = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) or "none"
        follows = {True: "follows KV events", False: "predicts the cache (no KV events)",
                   None: "no KV router"}[traffic.router_follows_kv_events]
        answered = "?" if traffic.frontend_requests is None else traffic.frontend_requests
        pools: dict[str, int] = {}
        for worker in traffic.workers:
            pools[worker.component] = pools.get(worker.component, 0) + worker.requests
        served = ", ".join(f"{c} {n}" for c, n in sorted(pools.items())) or "unknown"
        parts.append(f"router sees {seen}; {follows} ({traffic.kv_events_applied} applied); "
                     f"frontend answered {answered} requests; pools served {served}")
    return "; ".join(parts)
