"""A namespace's registrations in etcd, through aetcd (etcd's v3 gRPC API, asyncio).

Why aetcd: see the README ("Looking inside: doctor"). It is imported only here, inside the
functions, so `dis-serve --help` and `validate` never load gRPC.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..errors import UserInputError
from ..security.pki_files import PkiPaths
from .dynamo_layout import (
    InstanceKey,
    kv_events_transport,
    owns_key,
    parse_instance,
    parse_kv_event_source,
    parse_model_card,
)
from .observed import EtcdView, Registration

if TYPE_CHECKING:
    import aetcd

TIMEOUT_S = 2.0


def host_port(url: str) -> tuple[str, int]:
    """The first endpoint of an etcd URL list (`http://h:2379[,http://h2:2379]`)."""
    first = url.split(",")[0].strip()
    parts = urlsplit(first if "://" in first else f"http://{first}")
    if not parts.hostname:
        raise UserInputError(f"etcd URL {url!r} names no host", key="--etcd",
                             fix="give http://HOST:2379")
    return parts.hostname, parts.port or 2379


def client(url: str, tls: PkiPaths | None = None) -> aetcd.Client:
    """An etcd client; with `tls`, over mutual TLS with the graph's client certificate."""
    import aetcd

    host, port = host_port(url)
    if tls is None:
        return aetcd.Client(host=host, port=port, timeout=TIMEOUT_S)
    return _tls_client_class()(host=host, port=port, timeout=TIMEOUT_S, tls=tls)


def _tls_client_class() -> type[aetcd.Client]:
    import aetcd
    import grpc
    from aetcd import rpc, watcher

    class TlsClient(aetcd.Client):
        """aetcd 1.0.0 opens only plain channels: this one opens a TLS channel and builds
        the stubs its methods use on it."""

        def __init__(self, *, tls: PkiPaths, **kwargs) -> None:
            super().__init__(**kwargs)
            self._tls = tls

        async def connect(self) -> None:
            if self._connected.is_set():
                return
            credentials = grpc.ssl_channel_credentials(
                root_certificates=Path(self._tls.ca_cert).read_bytes(),
                private_key=Path(self._tls.client_key).read_bytes(),
                certificate_chain=Path(self._tls.client_cert).read_bytes())
            self.channel = rpc.secure_channel(f"{self._host}:{self._port}", credentials,
                                              options=self._options.items())
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(rpc.WatchStub(self.channel), timeout=self._timeout,
                                            metadata=self.metadata)
            self._connected.set()

    return TlsClient


async def namespace_keys(etcd: aetcd.Client, namespace: str) -> list[tuple[str, bytes, int]]:
    """(key, value, lease) of every key the namespace owns."""
    found = await etcd.get_prefix(b"v1/")
    keys = [(kv.key.decode(), kv.value, kv.lease) for kv in found]
    return [item for item in keys if owns_key(item[0], namespace)]


async def _lease_ttls(etcd: aetcd.Client, leases: set[int]) -> dict[int, tuple[int, int]]:
    """lease -> (granted TTL, seconds left); a lease that expired meanwhile is left out."""

    async def one(lease: int) -> tuple[int, int, int]:
        info = await etcd.get_lease_info(lease)
        return lease, info.grantedTTL, info.TTL

    answers = await asyncio.gather(*(one(lease) for lease in sorted(leases)))
    return {lease: (granted, left) for lease, granted, left in answers if left >= 0}


async def read_etcd(url: str, namespace: str, tls: PkiPaths | None = None) -> EtcdView:
    """The namespace's registrations with their leases, from the first of the members in
    `url` (a comma-separated list) that answers; the last error, if none can be read."""
    view = EtcdView(url=url, error="no etcd endpoint")
    for endpoint in [part.strip() for part in url.split(",") if part.strip()]:
        view = await _read_member(endpoint, namespace, tls)
        if view.error is None:
            return view
    return view


async def _read_member(url: str, namespace: str, tls: PkiPaths | None) -> EtcdView:
    try:
        async with client(url, tls) as etcd:
            keys = await namespace_keys(etcd, namespace)
            instances = [inst for key, value, lease in keys
                         if (inst := parse_instance(key, value, lease, namespace))]
            ttls = await _lease_ttls(etcd, {inst.lease for inst in instances if inst.lease})
    except UserInputError:
        raise
    except Exception as exc:  # grpc raises its own types for refused/timeout
        return EtcdView(url=url, error=_short(exc))
    publishers, models, transports = {}, {}, set()
    for key, value, _lease in keys:
        if (source := parse_kv_event_source(key, value)) is not None:
            publishers[str(source[0])] = source[1]
        elif (card := parse_model_card(key, value, namespace)) is not None:
            models[card[0]] = card[1]
        elif (transport := kv_events_transport(key, value)) is not None:
            transports.add(transport)
    return EtcdView(url=url, keys=len(keys), kv_publishers=publishers,
                    kv_event_transports=sorted(transports),
                    registrations=[_registration(inst, ttls, models) for inst in instances])


def _registration(inst: InstanceKey, ttls: dict[int, tuple[int, int]],
                  models: dict[str, str]) -> Registration:
    granted, left = ttls.get(inst.lease, (None, None))
    return Registration(component=inst.component, endpoint=inst.endpoint,
                        instance_id=inst.instance_id, lease_ttl_s=granted, lease_left_s=left,
                        address=inst.address, model=models.get(inst.instance_id))


async def delete_keys(url: str, keys: list[str]) -> int:
    """Delete exactly these keys; how many existed."""
    deleted = 0
    async with client(url) as etcd:
        for key in keys:
            deleted += int(await etcd.delete(key.encode()) is not None)
    return deleted


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]
