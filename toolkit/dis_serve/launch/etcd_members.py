"""How a member of the graph's etcd cluster starts: bootstrapping a new cluster with the
others, or rejoining one that runs without it (its node was lost and is back, its agent
was restarted: its data directory starts empty, node_data.py).

etcd's own rules (etcd.io "runtime reconfiguration"): a member whose data is gone cannot
start again under its old identity; the cluster forgets it (`member remove`), is told of a
new one at its peer URL (`member add`), and the member then starts with
`--initial-cluster-state existing`, catching up from the others. A member the cluster lists
but that never started (the others bootstrapped first) starts the same way. When no other
member answers, the cluster is being made: every member starts `new` with the same initial
cluster and token. The answer goes to etcd through its own setting,
ETCD_INITIAL_CLUSTER_STATE, in the member's environment (the argv is the plan's).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..security.pki_files import PkiPaths

NEW, EXISTING = "new", "existing"
ANSWER_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class MemberPlace:
    """This member's name and peer URL, and the other members' client URLs."""

    name: str
    peer_url: str
    others: list[str]


async def _listed(url: str, tls: PkiPaths | None) -> list[tuple[int, str, list[str]]]:
    from ..coordination.etcd_view import client

    async with client(url, tls) as etcd:
        return [(m.id, m.name, list(m.peer_urls)) async for m in etcd.members()]


async def _rejoin(url: str, place: MemberPlace, tls: PkiPaths | None,
                  listed: list[tuple[int, str, list[str]]]) -> None:
    from ..coordination.etcd_view import client

    mine = [(member_id, name) for member_id, name, peers in listed
            if place.peer_url in peers or name == place.name]
    async with client(url, tls) as etcd:
        if mine and mine[0][1] == "":
            return  # listed but never started: it starts as the cluster expects
        for member_id, _name in mine:
            await etcd.remove_member(member_id)
        await etcd.add_member([place.peer_url])


async def start_state(place: MemberPlace, tls: PkiPaths | None) -> str:
    """NEW when no other member answers; else EXISTING, after making the cluster expect
    this member at its peer URL."""
    for url in place.others:
        listed = await _answer(url, tls)
        if listed is None:
            continue
        await asyncio.wait_for(_rejoin(url, place, tls, listed), ANSWER_TIMEOUT_S * 2)
        return EXISTING
    return NEW


async def _answer(url: str, tls: PkiPaths | None) -> list[tuple[int, str, list[str]]] | None:
    """The member list `url` gives within the timeout; None when it gives none."""
    try:
        return await asyncio.wait_for(_listed(url, tls), ANSWER_TIMEOUT_S)
    except Exception:  # grpc raises its own types for refused/timeout
        return None


def member_start_state(place: MemberPlace, tls: PkiPaths | None) -> str:
    return asyncio.run(start_state(place, tls))
