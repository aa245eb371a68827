"""How a member of the graph's etcd cluster starts: bootstrapping a new cluster with the
others, or rejoining one that runs without it (its node was lost and is back, its agent
was restarted: its data directory starts empty, node_data.py).

etcd's own rules (etcd.io "runtime reconfiguration"): a member whose data is gone cannot
start again under its old identity; the cluster forgets it (`member remove`), is told of a
new one at its peer URL (`member add`), and the member then starts with
`--initial-cluster-state existing`, catching up from the others. A member the cluster lists
but that never started (no client URLs published: the others bootstrapped first) starts the
same way, without a change. While no other member answers with a leader, the cluster is
being made: every member starts `new` with the same initial cluster and token. The answer
goes to etcd through its own setting, ETCD_INITIAL_CLUSTER_STATE, in the member's
environment (the argv is the plan's).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..security.pki_files import PkiPaths

NEW, EXISTING = "new", "existing"
ANSWER_TIMEOUT_S = 2.0
# A member lost a moment ago may have been the leader: the others elect a new one (about a
# second, etcd's default election timeout) before a reconfiguration can commit.
RECONFIGURE_WITHIN_S = 20.0


@dataclass(frozen=True)
class MemberPlace:
    """This member's name and peer URL, and the other members' client URLs."""

    name: str
    peer_url: str
    others: list[str]


@dataclass(frozen=True)
class Listed:
    member_id: int
    name: str
    peer_urls: list[str]
    started: bool
    """It has published its client URLs: it ran in this cluster."""


async def _running_cluster(url: str, tls: PkiPaths | None) -> list[Listed] | None:
    """The members `url` lists when it answers and has a leader (a cluster runs); None
    otherwise."""
    from ..coordination.etcd_view import client

    async with client(url, tls) as etcd:
        if (await etcd.status()).leader is None:
            return None
        return [Listed(m.id, m.name, list(m.peer_urls), bool(list(m.client_urls)))
                async for m in etcd.members()]


async def _answer(url: str, tls: PkiPaths | None) -> list[Listed] | None:
    """What `url` says within the timeout; None when it says nothing (at once when its port
    does not even accept: the cluster is being made)."""
    from ..coordination.probes import tcp_accepts

    parts = urlsplit(url)
    if not tcp_accepts(parts.port or 2379, parts.hostname or "127.0.0.1"):
        return None
    try:
        return await asyncio.wait_for(_running_cluster(url, tls), ANSWER_TIMEOUT_S)
    except Exception:  # grpc raises its own types for refused/timeout
        return None


async def _make_room(url: str, place: MemberPlace, tls: PkiPaths | None,
                     listed: list[Listed]) -> None:
    """Make the running cluster expect this member at its peer URL: as it lists it when it
    never started, else forgotten and added anew."""
    from ..coordination.etcd_view import client

    mine = [m for m in listed if place.peer_url in m.peer_urls or m.name == place.name]
    if mine and not any(m.started for m in mine):
        return
    async with client(url, tls) as etcd:
        for member in mine:
            await etcd.remove_member(member.member_id)
        await etcd.add_member([place.peer_url])


async def start_state(place: MemberPlace, tls: PkiPaths | None) -> str:
    """NEW when no other member answers with a leader; else EXISTING, once the running
    cluster expects this member."""
    for url in place.others:
        listed = await _answer(url, tls)
        if listed is not None:
            await _reconfigure(url, place, tls, listed)
            return EXISTING
    return NEW


async def _reconfigure(url: str, place: MemberPlace, tls: PkiPaths | None,
                       listed: list[Listed]) -> None:
    """`_make_room`, tried again while the cluster elects a leader (RuntimeError past
    RECONFIGURE_WITHIN_S)."""
    deadline = asyncio.get_running_loop().time() + RECONFIGURE_WITHIN_S
    while True:
        try:
            await asyncio.wait_for(_make_room(url, place, tls, listed), ANSWER_TIMEOUT_S * 2)
            return
        except Exception as exc:  # grpc's own types: no leader yet, a timeout
            if asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"etcd at {url} did not take member {place.name} back "
                                   f"within {RECONFIGURE_WITHIN_S:g} s: {exc}") from exc
        await asyncio.sleep(0.5)
        listed = await _answer(url, tls) or listed


def member_start_state(place: MemberPlace, tls: PkiPaths | None) -> str:
    return asyncio.run(start_state(place, tls))
