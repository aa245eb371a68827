"""Keep a shared etcd/NATS clean: what a namespace left behind, and whether a live graph
still uses it. Only the namespace's own keys (whole path segments) and the JetStream streams
whose every subject is the namespace's are ever touched."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel, ConfigDict, Field

from .etcd_view import client, delete_keys, namespace_keys, read_etcd
from .nats_view import connect, delete_streams, namespace_streams


class CleanupPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    namespace: str
    etcd_url: str | None
    nats_url: str | None
    keys: list[str] = Field(description="etcd keys the namespace owns.")
    streams: list[str] = Field(description="JetStream streams the namespace owns.")

    @property
    def empty(self) -> bool:
        return not self.keys and not self.streams


class CleanupResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    keys_deleted: int
    streams_deleted: list[str]


async def _plan(namespace: str, etcd_url: str | None, nats_url: str | None) -> CleanupPlan:
    keys: list[str] = []
    if etcd_url is not None:
        async with client(etcd_url) as etcd:
            keys = sorted(key for key, _value, _lease in await namespace_keys(etcd, namespace))
    streams: list[str] = []
    if nats_url is not None:
        nc = await connect(nats_url)
        try:
            streams = sorted(s.name for s in await namespace_streams(nc, namespace))
        finally:
            await nc.close()
    return CleanupPlan(namespace=namespace, etcd_url=etcd_url, nats_url=nats_url, keys=keys,
                       streams=streams)


def plan_cleanup(namespace: str, etcd_url: str | None, nats_url: str | None) -> CleanupPlan:
    return asyncio.run(_plan(namespace, etcd_url, nats_url))


def apply_cleanup(plan: CleanupPlan) -> CleanupResult:
    async def run() -> CleanupResult:
        deleted = (await delete_keys(plan.etcd_url, plan.keys)
                   if plan.etcd_url and plan.keys else 0)
        streams = (await delete_streams(plan.nats_url, plan.streams)
                   if plan.nats_url and plan.streams else [])
        return CleanupResult(keys_deleted=deleted, streams_deleted=streams)

    return asyncio.run(run())


def live_registrations(namespace: str, etcd_url: str) -> list[str]:
    """Instances registered under the namespace whose request server answers: a live graph.
    Raises ConnectionError when etcd cannot be read."""
    from . import liveness
    from .probes import http_client

    view = asyncio.run(read_etcd(etcd_url, namespace))
    if view.error:
        raise ConnectionError(view.error)
    with http_client() as http:
        checked = liveness.check(view.registrations, http)
    return [f"{r.component}/{r.endpoint}/{r.instance_id}" for r in checked if not r.stale]
