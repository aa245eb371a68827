"""Where etcd and NATS keep their data on a multi-node graph's head node: node-local storage.

The run directory of a Slurm graph is on shared storage (every node reads it), which is the
wrong place for a key-value store's write-ahead log and JetStream's files: slow, shared with
every other job, and carried over into the next job of the same graph. The head node's
agent keeps them under `coordination.data_dir` (default `$TMPDIR`, else `/tmp`) in
`dis-serve-<user>/<graph>[-<Slurm job id>]`, both made 0700 and checked to be ours (another
user may have made them first in a shared /tmp). The directory outlives a restart of the
agent's supervisor (the keeper's: etcd and NATS find their data again); it is emptied when
the agent starts (Slurm job ids start again at 1 on a new cluster, and the old registrations
would be served to the new graph) and removed when the agent stops for good.
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Mapping
from pathlib import Path

from ..private_path import ensure_private_dir
from ..topology import Topology

# Node-local by intent; the subdirectories made in it are 0700 and checked to be ours.
DEFAULT_BASE = "/tmp"
SLURM_JOB_ENV = "SLURM_JOB_ID"


def coordination_data_dir(topo: Topology, environ: Mapping[str, str]) -> Path:
    """This graph's data directory on the head node (not made here)."""
    base = topo.coordination.data_dir or environ.get("TMPDIR") or DEFAULT_BASE
    job = environ.get(SLURM_JOB_ENV)
    return Path(base) / f"dis-serve-{_user()}" / (f"{topo.name}-{job}" if job else topo.name)


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a container user without a passwd entry
        return str(os.geteuid())


def make_data_dir(path: Path) -> None:
    """Make the directory and its per-user parent (0700), or check the ones there are ours;
    UserInputError naming the path when one is not."""
    os.makedirs(path.parent.parent, exist_ok=True)
    ensure_private_dir(path.parent, "coordination data directory")
    ensure_private_dir(path, "coordination data directory")


def remove_data_dir(path: Path) -> None:
    """Remove the graph's data directory (the per-user parent stays for other graphs)."""
    shutil.rmtree(path, ignore_errors=True)
