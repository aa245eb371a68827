"""A graph on an external (shared) etcd/NATS: before `up`, the servers answer and no live
graph uses the namespace; after `down`, what the namespace left there is removed."""

from __future__ import annotations

import asyncio

from ..errors import PreflightError
from ..topology import EtcdMode, NatsMode, Topology
from .cleanup import CleanupResult, apply_cleanup, live_registrations, plan_cleanup


def external_urls(topo: Topology) -> tuple[str | None, str | None]:
    """(etcd URL, NATS URL) of the planes that are external; None for embedded or off."""
    coord = topo.coordination
    etcd = coord.etcd.client_url if coord.etcd.mode is EtcdMode.EXTERNAL else None
    nats = coord.nats.client_url if coord.nats.mode is NatsMode.EXTERNAL else None
    return etcd, nats


def check_shared(topo: Topology) -> None:
    """PreflightError (one line) if an external plane is unreachable or the namespace is taken."""
    etcd_url, nats_url = external_urls(topo)
    if etcd_url is not None:
        try:
            live = live_registrations(topo.namespace, etcd_url)
        except ConnectionError as exc:
            raise PreflightError(f"coordination.etcd.url {etcd_url}: etcd does not answer "
                                 f"({exc}); start it or fix the URL") from None
        if live:
            raise PreflightError(
                f"Dynamo namespace {topo.namespace!r} on {etcd_url} is in use by a live graph "
                f"({len(live)} registrations, e.g. {live[0]}); give this graph another name "
                "or stop that one")
    if nats_url is not None:
        from .nats_view import connect

        async def probe() -> None:
            nc = await connect(nats_url)
            await nc.close()

        try:
            asyncio.run(probe())
        except Exception as exc:
            raise PreflightError(f"coordination.nats.url {nats_url}: NATS does not answer "
                                 f"({type(exc).__name__}); start it or fix the URL") from None


def clean_shared(topo: Topology) -> CleanupResult | None:
    """After the graph stopped: delete the namespace's leftovers on external planes."""
    etcd_url, nats_url = external_urls(topo)
    if etcd_url is None and nats_url is None:
        return None
    plan = plan_cleanup(topo.namespace, etcd_url, nats_url)
    return None if plan.empty else apply_cleanup(plan)
