"""What an edited topology changes in a running graph (`dis-serve apply`): workers added or
removed per pool, workers rolled (what they run differs), changes that only the record
keeps, and changes refused because they need a new graph. Pure.

A worker is rolled when the edited topology renders a different process for its very slot
(same node, GPUs and port): argv, environment or engine config inputs, whatever topology
key made them differ. The keys are only the reasons printed beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..render.launch_plan import ProcessSpec
from ..topology import PoolRole, Topology

# Keys a running graph takes (by prefix; `{role}` stands for each pool role): worker counts,
# what a roll changes, and what the record alone keeps. Any other key needs a new graph.
COUNT_KEY = "pools.{role}.workers"
ROLL_KEYS = ("pools.{role}.tensor_parallel", "pools.{role}.max_batch_size",
             "pools.{role}.max_num_tokens", "pools.{role}.free_gpu_memory_fraction",
             "model.revision", "model.path", "model.dtype", "model.prequantized",
             "model.max_input_tokens", "model.max_output_tokens", "mocker.",
             "observability.engine_metrics", "kubernetes.image", "kubernetes.image_digest")
RECORD_KEYS = ("pools.{role}.min_workers", "pools.{role}.max_workers", "supervision.",
               "autoscale", "kubernetes.")
# Why the refused ones need a new graph, by prefix (the first match says it).
NEW_GRAPH_BECAUSE = (
    ("name", "it names the run directory and the Dynamo namespace"),
    ("model.", "every worker and the frontend's model would change at once"),
    ("backend", "every worker would change engine at once"),
    ("mode", "the pools themselves would change"),
    ("pools.", "the pools themselves would change"),
    ("hardware", "the GPUs the graph was placed on would change"),
    ("placement", "where the graph runs would change"),
    ("coordination", "every process connects to etcd and NATS as they are"),
    ("security", "every process's certificates and planes would change"),
    ("frontend", "the frontend serves every request (ports and addresses included)"),
    ("router", "the frontend's router serves every request"),
    ("observability.system_port_base", "the running workers' ports would move"),
    ("kv_cache", "the router hashes KV blocks of one size across all workers"),
    ("kv_transfer", "prefill and decode workers must ship KV cache the same way"),
)


@dataclass(frozen=True)
class PoolChange:
    role: PoolRole
    before: int
    after: int
    rolled: list[str] = field(default_factory=list)
    because: list[str] = field(default_factory=list)

    def describe(self) -> list[str]:
        lines = []
        if self.after != self.before:
            verb = "add" if self.after > self.before else "remove"
            lines.append(f"{self.role.value}: {self.before} -> {self.after} workers ({verb} "
                         f"{abs(self.after - self.before)})")
        if self.rolled:
            lines.append(f"{self.role.value}: roll {', '.join(self.rolled)} ("
                         + (", ".join(self.because) or "what they run differs") + " changed)")
        return lines


@dataclass(frozen=True)
class ChangeSet:
    pools: list[PoolChange]
    recorded: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    """(topology key, why it needs a new graph)."""

    @property
    def changes_workers(self) -> bool:
        return any(p.before != p.after or p.rolled for p in self.pools)

    @property
    def empty(self) -> bool:
        return not self.changes_workers and not self.recorded and not self.refused

    def describe(self) -> list[str]:
        lines = [line for pool in self.pools for line in pool.describe()]
        if self.recorded:
            lines.append("recorded, no worker restarts: " + ", ".join(self.recorded))
        lines += [f"refused: {key} changed; that needs a new graph ({why}): `dis-serve down` "
                  "and `up` it, or give it another name" for key, why in self.refused]
        return lines or ["no change"]


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys of a topology dump (lists are one value)."""
    if not isinstance(data, dict):
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out |= flatten(value, f"{prefix}.{key}" if prefix else key)
    return out


def changed_keys(running: Topology, edited: Topology) -> list[str]:
    before, after = (flatten(t.model_dump(mode="json")) for t in (running, edited))
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _matches(key: str, patterns: tuple[str, ...]) -> bool:
    roles = [r.value for r in PoolRole]
    return any(key == p.format(role=r) or key.startswith(p.format(role=r) + ".")
               or (p.endswith(".") and key.startswith(p.format(role=r)))
               for p in patterns for r in roles)


def _why_new_graph(key: str) -> str:
    return next((why for prefix, why in NEW_GRAPH_BECAUSE if key.startswith(prefix)),
                "a running graph cannot take it")


def refusals(keys: list[str]) -> list[tuple[str, str]]:
    """The changed keys a running graph cannot take, each with why."""
    return [(k, _why_new_graph(k)) for k in keys
            if not _matches(k, (COUNT_KEY, *ROLL_KEYS, *RECORD_KEYS))]


def diff(running: Topology, edited: Topology, workers: list[ProcessSpec],
         rendered: dict[str, ProcessSpec]) -> ChangeSet:
    """`workers`: the running graph's workers; `rendered`: every process `edited` renders
    with those same worker slots (a worker whose rendered process differs is rolled)."""
    keys = changed_keys(running, edited)
    refused = refusals(keys)
    if refused:
        return ChangeSet(pools=[], refused=refused)
    pools = []
    for role, pool in edited.active_pools():
        mine = [w for w in workers if w.role is role]
        rolled = [w.name for w in mine if rendered.get(w.name) != w]
        because = sorted({k for k in keys if _matches(k, ROLL_KEYS)
                          and (not k.startswith("pools.") or k.startswith(f"pools.{role}."))})
        pools.append(PoolChange(role=role, before=len(mine), after=pool.workers,
                                rolled=rolled, because=because if rolled else []))
    rolling = {k for p in pools for k in p.because}
    recorded = [k for k in keys if k not in rolling and not _matches(k, (COUNT_KEY,))]
    return ChangeSet(pools=pools, recorded=recorded)
