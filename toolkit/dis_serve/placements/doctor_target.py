"""Our graph as the doctor reads it, from its run record and the plan it runs: where its etcd
and NATS answer, with its TLS files and NATS token, the metrics endpoints, what to expect,
and which pid is which process. Every placement's handle builds its target here."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorTarget
    from ..launch.run_record import RunRecord
    from ..launch.rundir import RunDir
    from ..render.launch_plan import LaunchPlan
    from ..topology import ProcessKind


def doctor_target(run: RunDir, record: RunRecord, plan: LaunchPlan,
                  pids: dict[int, str]) -> DoctorTarget:
    """`plan` is the resolved plan (a multi-node graph's from what its agents resolved:
    its etcd and NATS are read where the head's processes serve); `pids` pid -> process
    name where the pids are this machine's."""
    from ..coordination.doctor import DoctorTarget, expectations
    from ..launch.change_record import describe_change
    from ..launch.secrets import graph_nats_token
    from ..render.metrics_endpoints import FRONTEND, graph_endpoints
    from ..topology import EtcdMode, NatsMode, ProcessKind

    topo = run.read_topology()
    endpoints = graph_endpoints(plan, plan.endpoint)
    coord = topo.coordination
    etcd_url = _at_members(record.endpoints.etcd[0], plan, ProcessKind.ETCD)
    nats_url = (_at_members(record.endpoints.nats[0], plan, ProcessKind.NATS)
                if record.endpoints.nats else None)
    # The planes the graph runs itself are read with its own certificates (and token).
    tls = record.tls.planes
    return DoctorTarget(
        namespace=record.namespace, etcd_url=etcd_url, nats_url=nats_url,
        nats_token=graph_nats_token(topo, run.path.resolve())
        if coord.nats.mode is not NatsMode.OFF else None,
        etcd_tls=tls if coord.etcd.mode is EtcdMode.EMBEDDED else None,
        nats_tls=tls if coord.nats.mode is NatsMode.EMBEDDED else None,
        frontend_metrics=next(e.url for e in endpoints if e.pool == FRONTEND),
        frontend_tls=plan.endpoint_tls,
        worker_metrics=[e.url for e in endpoints if e.pool != FRONTEND],
        expected=expectations(topo, plan), graph=topo.name, plan=plan, pids=pids,
        change=describe_change(run.path))


def _at_members(url: str, plan: LaunchPlan, kind: ProcessKind) -> str:
    """`url` pointed at where the plan's embedded `kind` processes listen, each member in
    turn, comma-separated (the readers take the first that answers: a lost node's member
    does not blind them); an external server's URL is left as it is."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    members = [parts._replace(netloc=f"{p.probed_host}:{p.ports['client']}").geturl()
               for p in plan.processes if p.kind is kind]
    return ",".join(members) or url
