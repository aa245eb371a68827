"""Where etcd and NATS keep their data on a multi-node graph's head node: node-local storage,
and who owns it.

The run directory of a Slurm graph is on shared storage (every node reads it), which is the
wrong place for a key-value store's write-ahead log and JetStream's files: slow, shared with
every other job, and carried over into the next job of the same graph. The head node's
agent keeps them under `coordination.data_dir` (default `$TMPDIR`, else `/tmp`) in
`dis-serve-<user>/<graph>[-<Slurm job id>]@<node>` (every node that runs an etcd or NATS
member or a balancer has its own), both made 0700 and checked to be ours (another user may
have made them first in a shared /tmp).

Ownership is an exclusive `flock` on `<dir>.lock` beside the directory, taken by the agent
before it makes the directory and held as long as the agent lives: the forked supervisor
shares the lock (same open file), so a restart of the supervisor keeps the directory (etcd
and NATS find their data again), and a supervisor serving on after its keeper's SIGKILL
still owns it. The kernel drops the lock when the last holder dies, SIGKILL included, so
"no live owner" is a fact to test, never a guess from age or a pid that may be reused:
- the agent empties the directory when it starts (Slurm job ids start again at 1 on a new
  cluster, and old registrations would be served to the new graph) and removes it when it
  stops for good; it refuses to start while another live agent holds it;
- a start of the graph on the node first removes every unowned directory of the same graph
  (`<graph>`, `<graph>-<job id>`) that a killed agent left;
- `down` of a hosts graph and the end of the Slurm job (the batch script's EXIT trap,
  `dis-serve clear-data` on the head node) remove it when no agent owns it any more.
A graph on one machine keeps its balancer's sockets, configuration and Lua in the same kind
of directory, `<graph>@machine` (local_graph_dir): the run directory may be deleted while the
graph runs (the supervisor writes its record again), and haproxy's sockets and the files it
restarts from must not go with it. `up` claims it before it writes them and hands the lock to
the detached keeper and supervisor as it hands them the graph's lock (the parent closes its
copy: `forget`); the keeper removes it when it ends for good, a supervisor whose keeper was
killed when it ends, `down` (from the run record) when no one owns it any more, and the next
start of the graph when a killed supervisor left it.
A lock file is removed only while locked and only if it is still the file at its path, so a
process that opened it a moment earlier retries on the new one instead of sharing a ghost.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import re
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from ..errors import RunError
from ..files.private_path import ensure_private_dir, open_private
from ..render.launch_plan import LOCAL_NODE
from ..topology import Topology
from .rundir import RunDir

# Node-local by intent; the subdirectories made in it are 0700 and checked to be ours.
DEFAULT_BASE = "/tmp"
SLURM_JOB_ENV = "SLURM_JOB_ID"
LOCK_SUFFIX = ".lock"
# A `down` or another start may hold a stale directory's lock for the moment it removes it.
CLAIM_WAIT_S = 2.0
_POLL_S = 0.05


def coordination_data_dir(topo: Topology, environ: Mapping[str, str],
                          node: str | None = None) -> Path:
    """This graph's data directory on a node (not made here): `node`'s own on a multi-node
    graph, whose services (etcd and NATS members, the balancer) may run on several nodes
    that share a /tmp (the test bed's namespaces do)."""
    base = topo.coordination.data_dir or environ.get("TMPDIR") or DEFAULT_BASE
    job = environ.get(SLURM_JOB_ENV)
    name = f"{topo.name}-{job}" if job else topo.name
    return Path(base) / f"dis-serve-{_user()}" / (f"{name}@{node}" if node else name)


def local_graph_dir(topo: Topology, environ: Mapping[str, str]) -> Path:
    """A graph on one machine: the directory its balancer works in (not made here), outside
    the run directory and short (haproxy's socket paths)."""
    return coordination_data_dir(topo, environ, LOCAL_NODE)


def _user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:  # a container user without a passwd entry
        return str(os.geteuid())


def lock_file(path: Path) -> Path:
    return path.with_name(path.name + LOCK_SUFFIX)


class DataDirClaim:
    """An agent's hold on its data directory: the open, locked lock file (shared with the
    processes it forks, released by the kernel when the last of them dies)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Remove the directory and its lock file, then drop the lock (idempotent)."""
        if self._fd is not None:
            _remove_locked(self.path, self._fd)
            self._fd = None

    def forget(self) -> None:
        """Close this process's descriptor, leaving directory and lock to the processes it
        forked (they share the lock on)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def claim_data_dir(path: Path, graph: str) -> DataDirClaim:
    """Own `path` (the graph's data directory on this node), empty and 0700; first remove
    the unowned directories of `graph` that killed agents left beside it. RunError naming
    the holder when a live agent of another run owns `path`; UserInputError naming the path
    when it or its parent is not ours."""
    os.makedirs(path.parent.parent, exist_ok=True)
    ensure_private_dir(path.parent, "coordination data directory")
    remove_stale_data_dirs(path.parent, graph, keep=path.name)
    deadline = time.monotonic() + CLAIM_WAIT_S
    while (fd := _try_lock(path)) is None:
        if time.monotonic() > deadline:
            raise RunError(f"coordination data directory {path} is in use by "
                           f"{_holder(path)} (another run of graph {graph!r} on this node); "
                           "stop that run first, or give this graph another name or "
                           "coordination.data_dir")
        time.sleep(_POLL_S)
    try:
        _write_holder(fd)
        shutil.rmtree(path, ignore_errors=True)  # a new job starts empty (a link stays)
        ensure_private_dir(path, "coordination data directory")
    except BaseException:
        os.close(fd)
        raise
    return DataDirClaim(path, fd)


def remove_unowned(path: Path) -> bool:
    """Remove `path` and its lock file unless a live process holds the lock; whether it was
    removed (False also when there was nothing to remove)."""
    if not path.exists() and not lock_file(path).exists():
        return False
    fd = _try_lock(path)
    if fd is None:
        return False
    _remove_locked(path, fd)
    return True


def clear_data(topo: Topology, environ: Mapping[str, str],
               nodes: list[str | None]) -> list[Path]:
    """After the graph's agents: the data directories of `nodes` on this machine, each
    removed unless an agent still owns it; those removed (none on a machine that has
    none of them)."""
    paths = [coordination_data_dir(topo, environ, node) for node in nodes]
    return [path for path in paths if remove_unowned(path)]


def data_dir_nodes(run: RunDir) -> list[str | None]:
    """The nodes of the run whose agents keep a data directory (every node of a multi-node
    graph may; the name without a node is an earlier version's)."""
    try:
        plan = run.read_cluster_plan()
    except (OSError, ValueError):
        return [None]
    return [None, *(node.name for node in plan.nodes)]


def remove_stale_data_dirs(parent: Path, graph: str, *, keep: str | None = None) -> list[Path]:
    """Remove the unowned data directories of `graph` (`<graph>` and `<graph>-<job id>`,
    each perhaps `@<node>`) in `parent`, all but `keep`; the ones removed."""
    own = re.compile(re.escape(graph) + r"(-\d+)?(@[A-Za-z0-9_.-]+)?")
    names = {entry.name.removesuffix(LOCK_SUFFIX) for entry in _entries(parent)}
    return [parent / name for name in sorted(names)
            if name != keep and own.fullmatch(name) and remove_unowned(parent / name)]


def _entries(parent: Path) -> list[os.DirEntry[str]]:
    with contextlib.suppress(FileNotFoundError), os.scandir(parent) as found:
        return list(found)
    return []


def _try_lock(path: Path) -> int | None:
    """The lock file's fd, exclusively locked by this process; None while another holds it.
    Retries when the file was removed (or replaced) between opening and locking it."""
    lock = lock_file(path)
    while True:
        fd = open_private(lock, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                return None
            raise
        try:
            current = os.stat(lock, follow_symlinks=False).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            return fd
        os.close(fd)  # removed by its last owner meanwhile: lock the one at the path now


def _remove_locked(path: Path, fd: int) -> None:
    shutil.rmtree(path, ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock_file(path))
    os.close(fd)


def _write_holder(fd: int) -> None:
    """For the message of a start refused: which process holds the directory."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)


def _holder(path: Path) -> str:
    try:
        pid = lock_file(path).read_text().strip()
    except OSError:
        pid = ""
    return f"pid {pid}" if pid.isdigit() else "another process"
