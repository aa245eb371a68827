"""Preflight: is there room where a graph writes before it serves?

Everything a local graph writes lies in its run directory: the embedded etcd's data (its
write-ahead log is preallocated: etcd 3.5 creates each 64 MB segment whole, and the next
one ahead of need), the embedded NATS's JetStream store, the processes' logs and the mocker's
model card. `up` refuses a graph whose file system cannot hold that, in one line with the
numbers, before anything starts; on a multi-node graph (Slurm, hosts) each node's agent
checks the same for its share (etcd's and NATS's data in the head node's own data
directory, the logs and the card in the shared run directory) before it starts a process.
Without this a full disk showed as etcd crash-looping in Go stack frames, or a traceback
from the card's write. What the graph needs later (logs grow about 6 KB per request,
rotated at 32 MiB) is the headroom's to absorb, and a disk that fills while the graph serves
is reported where it bites (the state file, `down`, the CLI's one line for ENOSPC).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import PreflightError
from ..render.launch_plan import LaunchPlan
from ..render.run_layout import ETCD_DATA, NATS_DATA
from ..topology import ProcessKind, Topology

MIB = 1024 * 1024
# etcd 3.5: the first WAL segment and the one its file pipeline preallocates next, 64,000,000
# bytes each (measured on tmpfs: docs/running.md), plus its bolt database at start.
ETCD_BYTES = 2 * 64_000_000 + 4 * MIB
# NATS with JetStream: its store directory at start, with room for the streams Dynamo makes.
NATS_BYTES = 4 * MIB
# The processes' logs until the first rotation would make room (Dynamo logs ~6 KB/request).
LOG_HEADROOM_BYTES = 16 * MIB
# The mocker's card: tokenizer.json takes about 18 bytes per vocabulary entry (demo card:
# 886,781 bytes for 50,005 entries); the rest is a few small JSON files.
CARD_BYTES_PER_TOKEN = 24
CARD_FIXED_BYTES = 64 * 1024
_COORDINATION_DATA = ((ProcessKind.ETCD, ETCD_DATA, ETCD_BYTES, "etcd's preallocated WAL"),
                      (ProcessKind.NATS, NATS_DATA, NATS_BYTES, "NATS's JetStream store"))


def needed_bytes(plan: LaunchPlan, topo: Topology,
                 data_dir: Path) -> dict[str, tuple[int, str]]:
    """What `plan`'s processes write before they serve: path -> (bytes, what). Its etcd's
    and NATS's data go to `data_dir` (a local graph's run directory, a multi-node graph's
    node's own directory: node_data.py), the logs to the run directory, the mocker's card
    where it is still to be written."""
    kinds = {spec.kind for spec in plan.processes}
    needs = {str(data_dir / data): (size, what)
             for kind, data, size, what in _COORDINATION_DATA if kind in kinds}
    needs[str(Path(plan.run_dir) / "logs")] = (LOG_HEADROOM_BYTES, "the logs")
    return needs | card_needs(plan, topo)


def card_needs(plan: LaunchPlan, topo: Topology) -> dict[str, tuple[int, str]]:
    """The mocker's card, where it is still to be written."""
    card = Path(plan.model_path)
    if not plan.needs_model_card or (card / "tokenizer.json").is_file():
        return {}
    vocab = topo.model.resolved_architecture().vocab_size
    return {str(card): (vocab * CARD_BYTES_PER_TOKEN + CARD_FIXED_BYTES, "the model card")}


def _existing(path: Path) -> Path:
    """`path`, or the nearest ancestor of it that exists (where it will be made)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def check_disk(name: str, needs: dict[str, tuple[int, str]], fix: str) -> None:
    """Refuse, in one line naming the file system and the numbers, a graph (or one node's
    share of it) whose file system(s) lack the room `needs` says it writes before it
    serves."""
    by_device: dict[int, tuple[Path, int, list[str]]] = {}
    for path, (size, what) in needs.items():
        where = _existing(Path(path))
        device = os.stat(where).st_dev
        root, total, whats = by_device.get(device, (where, 0, []))
        by_device[device] = (root, total + size, [*whats, f"{what} {size / MIB:.0f} MiB"])
    for where, total, whats in by_device.values():
        free = shutil.disk_usage(where).free
        if free < total:
            raise PreflightError(
                f"{name}: {where} has {free / MIB:.1f} MiB free, but the graph writes "
                f"about {total / MIB:.0f} MiB there before it serves ({', '.join(whats)}); "
                f"free space there, or {fix}")
