"""A real N-node Slurm cluster on one machine: one network namespace per node on a bridge.

Each node K (1..9) is a network namespace `dsn<tag>-K` whose `eth0` (a veth on the bridge
`dsbr<tag>`) has 198.18.0.1K/24; the bridge has 198.18.0.1 in this machine's own namespace,
where munged and slurmctld run. Every address comes from 198.18.0.0/24, the block set aside
for network benchmarks, and no namespace gets a route out of it. One slurmd per node runs
inside its namespace, started with `nsenter --net=` (`ip netns exec` remounts /sys, and
slurmd 22.05 then stops with "Unable to initialize cgroup plugin"). An optional "attacker"
namespace sits on the same bridge with no Slurm, for tests of what a stranger on the
cluster network can reach.

`<tag>` is this process's pid and a letter, so names never clash with another run's, and a
run killed before its teardown is recognised by its dead pid and cleaned up by the next
(`remove_stale`), matched by our own prefixes only.

    with NetnsCluster.start(tmp_dir, nodes=3) as cluster:
        cluster.run_in("n2", "ip", "-4", "addr")
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import psutil

import slurm_cluster
from slurm_cluster import SlurmDaemons, SlurmNode, binary, stop_pids

SUBNET = "198.18.0"
BRIDGE_ADDRESS = f"{SUBNET}.1"
ATTACKER_ADDRESS = f"{SUBNET}.200"
PREFIX_LEN = 24
MAX_NODES = 9
NAMESPACE_PREFIX = "dsn"
BRIDGE_PREFIX = "dsbr"
VETH_PREFIX = "dsv"
# Its own ports: the single-node cluster's (18870/18871) may be up on loopback beside it.
CTLD_PORT = 18872
SLURMD_PORT = 18873
# One file per live run naming its Slurm directory, so the next run can stop what a killed
# one left running.
REGISTRY = Path(tempfile.gettempdir()) / "ds-testbed"
_OWNER = re.compile(rf"^(?:{NAMESPACE_PREFIX}|{BRIDGE_PREFIX}|{VETH_PREFIX})(\d+)[a-z]")
_tags = (f"{os.getpid()}{letter}" for letter in itertools.cycle("abcdefghijklmnopqrstuvwxyz"))


def node_address(k: int) -> str:
    """Node K's address (K from 1): 198.18.0.1K."""
    if not 1 <= k <= MAX_NODES:
        raise ValueError(f"node {k}: the test bed has nodes 1..{MAX_NODES}")
    return f"{SUBNET}.1{k}"


def unavailable_reason() -> str | None:
    """Why namespaces with Slurm in them cannot be made here, or None when they can."""
    reason = slurm_cluster.unavailable_reason()
    if reason is not None:
        return reason
    missing = [name for name in ("ip", "nsenter") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not installed (make install adds iproute2 as root)"
    probe = f"{NAMESPACE_PREFIX}{os.getpid()}z-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True,
                          check=False)
    if made.returncode != 0:
        return f"cannot create a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def ip(*args: str) -> str:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, check=False,
                         timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out.stdout


def in_namespace(namespace: str, *argv: str) -> list[str]:
    """argv run inside a namespace's network stack only (mounts and /sys stay as they are)."""
    return ["nsenter", f"--net=/var/run/netns/{namespace}", "--", *argv]


def namespace_pids(namespace: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                         check=False)
    return [int(word) for word in out.stdout.split()]


def crash(pids: list[int]) -> None:
    """A machine's crash, as near as processes allow: every one frozen (so none sees another
    die), then SIGKILLed children before parents. The order matters: when a process dies
    while the process group of a child of its (same session, another group) has stopped
    members, that group is orphaned and the kernel sends it SIGHUP and SIGCONT (POSIX's
    orphaned-process-group rule). Killing slurmstepd before the batch shell woke the shell's
    stopped sruns with a SIGHUP, which srun answers with "forcing job termination": SIGKILL
    to its steps on every other node, a death no real node loss causes."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGSTOP)
    for pid in sorted(pids, key=_depth, reverse=True):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _depth(pid: int) -> int:
    try:
        return len(psutil.Process(pid).parents())
    except psutil.Error:
        return 0


def _owner_gone(name: str) -> bool:
    match = _OWNER.match(name)
    return match is not None and not psutil.pid_exists(int(match.group(1)))


def remove_stale() -> list[str]:
    """Remove what a killed earlier run of ours left: its daemons, namespaces (and every
    process still in them), veths and bridge. Only names with our prefixes whose owning pid
    is gone. Returns what it removed."""
    removed = []
    for entry in REGISTRY.glob("*.json") if REGISTRY.is_dir() else []:
        if _owner_gone(f"{NAMESPACE_PREFIX}{entry.stem}"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                root = Path(json.loads(entry.read_text())["root"])
                SlurmDaemons(root=root, nodes=()).stop(timeout_s=5)
            entry.unlink(missing_ok=True)
            removed.append(str(entry))
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.split() else ""
        if _owner_gone(name):
            stop_pids(namespace_pids(name), timeout_s=5)
            ip("netns", "del", name)
            removed.append(name)
    for line in ip("-o", "link", "show").splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if _owner_gone(name):
            with contextlib.suppress(RuntimeError):  # a veth goes with its peer's namespace
                ip("link", "del", name)
            removed.append(name)
    return removed




@dataclass
class Network:
    """A bridge with 198.18.0.1 and namespaces on it, each with `lo` and `eth0` up."""

    tag: str
    namespaces: dict[str, str] = field(default_factory=dict)
    """Namespace name -> its eth0 address."""

    @property
    def bridge(self) -> str:
        return f"{BRIDGE_PREFIX}{self.tag}"

    def create_bridge(self) -> None:
        ip("link", "add", self.bridge, "type", "bridge")
        ip("addr", "add", f"{BRIDGE_ADDRESS}/{PREFIX_LEN}", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")

    def add(self, suffix: str, address: str) -> str:
        """A namespace `dsn<tag>-<suffix>` at `address` on the bridge; its name."""
        namespace = f"{NAMESPACE_PREFIX}{self.tag}-{suffix}"
        veth = f"{VETH_PREFIX}{self.tag}-{suffix}"
        ip("netns", "add", namespace)
        self.namespaces[namespace] = address
        ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
        ip("link", "set", veth, "master", self.bridge, "up")
        ip("-n", namespace, "addr", "add", f"{address}/{PREFIX_LEN}", "dev", "eth0")
        ip("-n", namespace, "link", "set", "eth0", "up")
        ip("-n", namespace, "link", "set", "lo", "up")
        return namespace

    def remove(self) -> None:
        """Stop every process left in the namespaces, then delete them, the veths and the
        bridge (whatever part of them exists)."""
        for namespace in self.namespaces:
            stop_pids(namespace_pids(namespace), timeout_s=5)
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", namespace)
        for line in ip("-o", "link", "show").splitlines():
            name = line.split(":")[1].strip().split("@")[0]
            if name.startswith((f"{VETH_PREFIX}{self.tag}-", self.bridge)):
                with contextlib.suppress(RuntimeError):
                    ip("link", "del", name)


def leftovers(tag: str) -> list[str]:
    """Namespaces and links of the run `tag` that still exist (empty after teardown)."""
    names = [line.split()[0] for line in ip("netns", "list").splitlines() if line.split()]
    names += [line.split(":")[1].strip().split("@")[0]
              for line in ip("-o", "link", "show").splitlines()]
    ours = (f"{NAMESPACE_PREFIX}{tag}-", f"{VETH_PREFIX}{tag}-", f"{BRIDGE_PREFIX}{tag}")
    return [name for name in names if name.startswith(ours)]


@dataclass
class NetnsCluster(SlurmDaemons):
    """Slurm nodes n1..nN, each in its own namespace; the controller on the bridge."""

    network: Network | None = None
    attacker: str | None = None
    """The namespace of a machine on the same network without Slurm (None: not made)."""

    @classmethod
    def start(cls, root: Path, nodes: int = 3, *, attacker: bool = True,
              timeout_s: float = 30.0, slurmd_timeout_s: int | None = None) -> NetnsCluster:
        remove_stale()
        tag = next(_tags)
        members = tuple(SlurmNode(f"n{k}", node_address(k)) for k in range(1, nodes + 1))
        cluster = cls(root=root, nodes=members)
        REGISTRY.mkdir(exist_ok=True)
        (REGISTRY / f"{tag}.json").write_text(json.dumps({"root": str(root)}))
        atexit.register(cluster.stop)
        try:
            cluster.network = Network(tag)
            cluster.network.create_bridge()
            for k, node in enumerate(members, start=1):
                cluster.network.add(str(k), node.address)
            if attacker:
                cluster.attacker = cluster.network.add("x", ATTACKER_ADDRESS)
            # Bound to every address: the host name resolves to 127.0.0.1, which the nodes' own
            # loopback shadows, so slurmctld must answer at the bridge address too.
            cluster.write_config(BRIDGE_ADDRESS, CTLD_PORT, SLURMD_PORT, bind_any=True,
                                 slurmd_timeout_s=slurmd_timeout_s)
            cluster.start_controller()
            for node in members:
                cluster.run_daemon(*cluster.command_in(node.name, binary("slurmd"), "-N",
                                                       node.name, "-f", str(cluster.conf)))
            cluster.wait_idle(timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    @property
    def tag(self) -> str:
        assert self.network is not None
        return self.network.tag

    def namespace(self, node: str) -> str:
        """The namespace of node `n<K>`."""
        k = int(node.removeprefix("n"))
        return f"{NAMESPACE_PREFIX}{self.tag}-{k}"

    def address(self, node: str) -> str:
        return next(n.address for n in self.nodes if n.name == node)

    def command_in(self, node: str, *argv: str) -> list[str]:
        """argv to run `argv` inside node `node`'s network namespace."""
        return in_namespace(self.namespace(node), *argv)

    def run_in(self, node: str, *argv: str, **kwargs) -> subprocess.CompletedProcess[str]:
        kwargs = {"capture_output": True, "text": True, "check": False, "timeout": 60} | kwargs
        return subprocess.run(self.command_in(node, *argv), **kwargs)

    def popen_in(self, node: str, argv: list[str], **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.command_in(node, *argv), **kwargs)

    def start_hosts_scripts(self, run_dir: Path, nodes, env) -> dict[str, subprocess.Popen]:
        """Each node's rendered `node-<node>.sh` in its namespace, as an operator starts it
        on that host: its output in `node-<node>.out` beside it, in a session of its own."""
        scripts = {}
        for node in nodes:
            with (run_dir / f"node-{node}.out").open("wb") as log:
                scripts[node] = self.popen_in(node, ["bash", str(run_dir / f"node-{node}.sh")],
                                              env=env, stdout=log, stderr=subprocess.STDOUT,
                                              start_new_session=True)
        return scripts

    def processes_in(self, node: str) -> list[int]:
        """Pids of every process in the node's namespace (its slurmd included)."""
        return namespace_pids(self.namespace(node))

    def signal_node(self, node: str, sig: signal.Signals) -> list[int]:
        """`sig` to every process in the node's namespace (SIGSTOP: a frozen machine); their
        pids."""
        pids = self.processes_in(node)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        return pids

    def stop(self, timeout_s: float = 20.0) -> None:
        """Cancel every job, stop the daemons by pid, then every process left in a namespace,
        and delete the namespaces, veths and bridge. Safe to call twice."""
        atexit.unregister(self.stop)
        try:
            super().stop(timeout_s)
        finally:
            if self.network is not None:
                self.network.remove()
                (REGISTRY / f"{self.network.tag}.json").unlink(missing_ok=True)
