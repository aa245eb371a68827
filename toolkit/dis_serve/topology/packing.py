"""GPU packing: which global GPU ids each worker of each pool gets.

A pure function of the pools and the nodes' GPU counts, below `Topology`: its validator
rejects pools that cannot be packed, and `dis_serve.render.node_layout.gpu_assignment` is what the
renderers and preflight read.
"""

from __future__ import annotations

from collections.abc import Sequence

from .enums import PoolRole
from .pools import Pool


def pack_gpus(pools: Sequence[tuple[PoolRole, Pool]], per_node: int,
              counts: Sequence[int]) -> dict[PoolRole, list[list[int]]]:
    """Global GPU ids per worker of each pool: explicit ids, else packed in pool order onto
    the nodes' GPUs (`counts[n]` usable on node n, whose ids start at n * `per_node`) without
    letting a worker straddle two nodes. Workers that do not fit get ids past the last node
    (the budget check reports them)."""
    taken = {g for _, p in pools if p.gpu_ids for ids in p.gpu_ids for g in ids}
    cursor = 0
    out: dict[PoolRole, list[list[int]]] = {}
    for role, pool in pools:
        if pool.gpu_ids is not None:
            out[role] = [list(ids) for ids in pool.gpu_ids]
            continue
        workers = []
        for _ in range(pool.workers):
            while True:
                node = cursor // per_node
                count = counts[node] if node < len(counts) else per_node
                if cursor + pool.tensor_parallel > node * per_node + count:
                    cursor = (node + 1) * per_node
                    continue
                ids = list(range(cursor, cursor + pool.tensor_parallel))
                if taken.isdisjoint(ids):
                    break
                cursor += 1
            workers.append(ids)
            cursor += pool.tensor_parallel
        out[role] = workers
    return out
