"""The target topology of `dis-serve scale NAME POOL=N ...` and `dis-serve apply FILE`, from
the graph as it runs now; every bad input one UserInputError (exit 2) naming it. Pure."""

from __future__ import annotations

import re

from pydantic import ValidationError

from ..errors import UserInputError
from ..topology import PoolRole, Topology

POOL_COUNT_RE = re.compile(r"([a-z]+)=([0-9]{1,4})")


def scale_target(running: Topology, requests: list[str]) -> Topology:
    """`running` with each `POOL=N` of `requests` as that pool's worker count."""
    if not requests:
        raise UserInputError("no POOL=N given", key="POOL=N",
                             fix=f"e.g. `decode=2`; pools: {_pools(running)}")
    data = running.model_dump(mode="json")
    seen = set()
    for request in requests:
        match = POOL_COUNT_RE.fullmatch(request)
        if match is None:
            raise UserInputError(f"{request[:40]!r} is not POOL=N", key="POOL=N",
                                 fix=f"a pool name and a worker count, e.g. decode=2 "
                                     f"(pools: {_pools(running)})")
        role, count = match.group(1), int(match.group(2))
        if role in seen:
            raise UserInputError(f"{role} is given twice", key="POOL=N", fix="give it once")
        seen.add(role)
        if role not in {r.value for r, _ in running.active_pools()}:
            raise UserInputError(f"graph {running.name!r} has no pool {role!r}",
                                 key="POOL=N", fix=f"its pools: {_pools(running)}")
        _check_bounds(running, PoolRole(role), count)
        data["pools"][role]["workers"] = count
    return _validated(data, running.name)


def _check_bounds(running: Topology, role: PoolRole, count: int) -> None:
    pool = running.pools.get(role)
    assert pool is not None
    if count < pool.min_workers:
        raise UserInputError(f"{role.value}={count} is below pools.{role.value}.min_workers "
                             f"({pool.min_workers})", key="POOL=N",
                             fix=f"ask for {pool.min_workers} or more (or `apply` a lower "
                                 "min_workers)")
    ceiling = running.max_workers(role)
    if ceiling is not None and count > ceiling:
        raise UserInputError(f"{role.value}={count} is above the pool's ceiling of {ceiling} "
                             f"(pools.{role.value}.max_workers)", key="POOL=N",
                             fix=f"ask for {ceiling} or fewer (or `apply` a higher "
                                 "max_workers; on Slurm the job must hold the GPUs)")


def validated_counts(running: Topology, counts: dict[PoolRole, int]) -> Topology:
    """`running` with these worker counts."""
    data = running.model_dump(mode="json")
    for role, count in counts.items():
        data["pools"][role.value]["workers"] = count
    return _validated(data, running.name)


def _validated(data: dict, name: str) -> Topology:
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "topology"
        raise UserInputError(first["msg"].removeprefix("Value error, "),
                             key=where, fix=f"graph {name!r} cannot take this") from None


def _pools(topo: Topology) -> str:
    return ", ".join(f"{r.value} ({p.workers})" for r, p in topo.active_pools())
