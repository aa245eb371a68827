"""A namespace on NATS, through nats-py: server and JetStream health, the namespace's streams
and consumer lag, and which subjects (KV events per publisher) carry messages right now."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import Counter
from typing import TYPE_CHECKING

from ..security.pki_files import PkiPaths
from .dynamo_layout import KV_EVENTS_TOPIC, envelope_publisher, owns_stream, subject_prefix
from .observed import NatsView, StreamView

if TYPE_CHECKING:
    from nats.aio.client import Client

CONNECT_TIMEOUT_S = 2.0


def tls_context(tls: PkiPaths) -> ssl.SSLContext:
    """Verify the server against the graph's CA; present the graph's client certificate."""
    context = ssl.create_default_context(cafile=tls.ca_cert)
    context.load_cert_chain(tls.client_cert, tls.client_key)
    return context


async def connect(url: str, token: str | None = None, tls: PkiPaths | None = None) -> Client:
    """A NATS connection to the first of the members in `url` (comma-separated) that takes
    it; `token` for a server with token authentication, `tls` for one that asks for the
    graph's client certificate."""
    import nats

    async def quiet(_exc: Exception) -> None:  # nats-py prints errors unless given a callback
        return None

    # nats-py 2.16 retries a refused first connect forever when max_reconnect_attempts is 0
    # (measured); one attempt and no wait ends it with NoServersError at once.
    servers = [part.strip() for part in url.split(",") if part.strip()]
    return await asyncio.wait_for(
        nats.connect(servers, connect_timeout=CONNECT_TIMEOUT_S, allow_reconnect=False,
                     max_reconnect_attempts=1, reconnect_time_wait=0, error_cb=quiet,
                     dont_randomize=True, token=token,
                     tls=tls_context(tls) if tls else None),
        timeout=(1 + len(servers)) * CONNECT_TIMEOUT_S)


async def namespace_streams(nc: Client, namespace: str) -> list[StreamView]:
    jsm = nc.jsm()
    views = []
    for info in await jsm.streams_info():
        subjects = list(info.config.subjects or [])
        if not owns_stream(subjects, namespace):
            continue
        consumers = {c.name: int(c.num_pending or 0)
                     for c in await jsm.consumers_info(info.config.name)}
        views.append(StreamView(name=info.config.name, subjects=subjects,
                                messages=int(info.state.messages), consumers=consumers))
    return views


async def _jetstream_enabled(nc: Client) -> bool:
    from nats.errors import NoRespondersError, TimeoutError
    from nats.js.errors import ServiceUnavailableError

    try:
        await nc.jsm().account_info()
    except (NoRespondersError, ServiceUnavailableError, TimeoutError):
        return False
    return True


async def _listen(nc: Client, namespace: str, window_s: float) -> tuple[Counter, Counter]:
    """Messages per subject and KV events per publisher id during `window_s` seconds."""
    subjects: Counter[str] = Counter()
    publishers: Counter[str] = Counter()

    async def count(msg) -> None:
        subjects[msg.subject] += 1
        if msg.subject.endswith("." + KV_EVENTS_TOPIC):
            publishers[str(envelope_publisher(msg.data))] += 1

    sub = await nc.subscribe(subject_prefix(namespace) + ">", cb=count)
    await asyncio.sleep(window_s)
    await sub.unsubscribe()
    return subjects, publishers


async def read_nats(url: str, namespace: str, window_s: float,
                    token: str | None = None, tls: PkiPaths | None = None) -> NatsView:
    try:
        nc = await connect(url, token, tls)
    except Exception as exc:  # nats-py raises several unrelated types for a refused connect
        return NatsView(url=url, error=f"{type(exc).__name__}: {exc}"[:200])
    try:
        jetstream = await _jetstream_enabled(nc)
        streams = await namespace_streams(nc, namespace) if jetstream else []
        subjects, publishers = await _listen(nc, namespace, window_s)
        return NatsView(url=url, server_version=_version(nc),
                        jetstream=jetstream, streams=streams, window_s=window_s,
                        subjects=dict(subjects), kv_events=dict(publishers))
    except Exception as exc:
        return NatsView(url=url, error=f"{type(exc).__name__}: {exc}"[:200])
    finally:
        with contextlib.suppress(Exception):
            await nc.close()


def _version(nc: Client) -> str:
    v = nc.connected_server_version
    return f"{v.major}.{v.minor}.{v.patch}"


async def delete_streams(url: str, names: list[str]) -> list[str]:
    """Delete exactly these streams; the names that existed."""
    from nats.js.errors import NotFoundError

    nc = await connect(url)
    deleted = []
    try:
        jsm = nc.jsm()
        for name in names:
            with contextlib.suppress(NotFoundError):
                await jsm.delete_stream(name)
                deleted.append(name)
    finally:
        await nc.close()
    return deleted
