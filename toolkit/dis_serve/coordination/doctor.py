"""`run_doctor(target) -> DoctorReport`: etcd, NATS and metrics of one namespace, read at once,
folded into named findings. Used by `dis-serve doctor` and `dis-serve status`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..security.pki_files import EndpointTls, PkiPaths
from ..topology import PoolRole
from . import findings as rules
from .etcd_view import read_etcd
from .findings import Expectations, Finding
from .nats_view import read_nats
from .observed import EtcdView, NatsView, TrafficView

if TYPE_CHECKING:
    from ..render.launch_plan import LaunchPlan
    from ..topology import Topology


@dataclass(frozen=True)
class DoctorTarget:
    """Where a namespace's coordination plane lives, and (for our graphs) what to expect."""

    namespace: str
    etcd_url: str
    nats_url: str | None = None
    nats_token: str | None = field(default=None, repr=False)  # our graph's, from its auth
    etcd_tls: PkiPaths | None = None  # our graph's certificates, when its etcd is ours
    nats_tls: PkiPaths | None = None
    frontend_metrics: str | None = None
    frontend_tls: EndpointTls | None = None  # our graph's HTTPS frontend: its CA (and cert)
    worker_metrics: list[str] = field(default_factory=list)
    expected: Expectations | None = None
    graph: str | None = None
    plan: LaunchPlan | None = None
    pids: dict[int, str] = field(default_factory=dict)  # our graph's: pid -> process name
    change: str | None = None  # our graph's change under way, or how the last one ended


class DoctorReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    namespace: str
    graph: str | None = Field(default=None, description="Our graph's name, if it is ours.")
    expected: Expectations | None
    etcd: EtcdView
    nats: NatsView | None
    traffic: TrafficView | None
    findings: list[Finding]
    change: str | None = Field(default=None, description="A change of the running graph "
                                                         "under way, or how the last ended.")

    @property
    def healthy(self) -> bool:
        return not self.findings


def expectations(topo: Topology, plan: LaunchPlan | None = None) -> Expectations:
    """What a healthy graph registers: the workers of `plan` where given (a graph changed
    while it serves runs what its plan's revision says), else of the topology's pools."""
    workers: dict[str, int] = {}
    counts = ({role: pool.workers for role, pool in topo.active_pools()} if plan is None else
              {role: sum(1 for w in plan.workers if w.role is role)
               for role, _ in topo.active_pools()})
    for role, count in counts.items():
        component = role.dynamo_component
        workers[component] = workers.get(component, 0) + count
    roles = [role for role, _ in topo.active_pools()]
    return Expectations(
        workers=workers,
        prefill_components=[r.dynamo_component for r in roles if r is PoolRole.PREFILL],
        kv_router=topo.router.mode.is_kv_aware,
        kv_event_components=[r.dynamo_component for r in roles if r.publishes_kv_events],
        kv_block_size=topo.kv_cache.block_size)


def run_doctor(target: DoctorTarget, window_s: float = 3.0) -> DoctorReport:
    """Read etcd and NATS together (NATS listens for `window_s` seconds), then metrics."""
    from . import liveness
    from .probes import http_client
    from .traffic import read_traffic

    etcd, nats = asyncio.run(_read_planes(target, window_s))
    with http_client(tls=target.frontend_tls) as client:
        etcd = etcd.model_copy(update={"registrations": liveness.check(
            etcd.registrations, client, target.plan, target.pids)})
        traffic = None
        if target.frontend_metrics or target.worker_metrics:
            traffic = read_traffic(client, target.frontend_metrics, target.worker_metrics)
    found = (rules.registration_findings(etcd, target.expected) + rules.nats_findings(nats)
             + (rules.traffic_findings(etcd, traffic, target.expected) if not etcd.error
                else []))
    return DoctorReport(namespace=target.namespace, graph=target.graph,
                        expected=target.expected, etcd=etcd, nats=nats, traffic=traffic,
                        findings=found, change=target.change)


async def _read_planes(target: DoctorTarget, window_s: float) -> tuple[EtcdView,
                                                                        NatsView | None]:
    etcd = read_etcd(target.etcd_url, target.namespace, target.etcd_tls)
    if target.nats_url is None:
        return await etcd, None
    return await asyncio.gather(etcd, read_nats(target.nats_url, target.namespace, window_s,
                                                target.nats_token, target.nats_tls))
