"""Which process runs on which node, and what a placement costs: pure views of a topology.

`validate` prints them; the hosts and Slurm renderers build their scripts from the same
layout, so what `validate` shows is what runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..hardware.sizing import kv_bytes_per_token
from ..topology import (
    EtcdMode,
    KvInterconnect,
    NatsMode,
    PoolRole,
    ProcessKind,
    Topology,
    pack_gpus,
)

MIB = 1024**2
# A reference point for the warning, not a measurement: a 25 Gb/s Ethernet link.
TCP_REFERENCE_GBITS = 25.0


@dataclass(frozen=True)
class WorkerSlot:
    role: PoolRole
    index: int
    node: int
    gpus: tuple[int, ...] = field(default=())
    """GPU ids on its node."""
    port: int = 0
    """Its system port (/health, /metrics)."""

    @property
    def name(self) -> str:
        return f"{self.role.value}-{self.index}"

    @staticmethod
    def index_of(name: str) -> int:
        """The index in a worker's name (`decode-3`: 3)."""
        return int(name.rpartition("-")[2])


@dataclass(frozen=True)
class ServiceSlot:
    """One process of a service the graph runs besides its workers (an etcd or NATS member,
    a frontend replica, its balancer or floating address), on its node."""

    kind: ProcessKind
    index: int
    count: int
    """How many the graph runs: a lone one keeps the kind's own name."""

    @property
    def name(self) -> str:
        return self.kind.value if self.count == 1 else f"{self.kind.value}-{self.index}"


@dataclass(frozen=True)
class NodeLayout:
    index: int
    name: str
    address: str | None
    """Cluster-facing address; None when it is resolved on the node at run time (Slurm)."""
    gpus: int
    head: bool
    workers: tuple[WorkerSlot, ...]
    slots: tuple[ServiceSlot, ...] = ()
    """The processes besides workers, in start order (`service_slots`)."""

    @property
    def services(self) -> tuple[ProcessKind, ...]:
        return tuple(slot.kind for slot in self.slots)

    @property
    def processes(self) -> list[str]:
        return [slot.name for slot in self.slots] + [w.name for w in self.workers]


def gpu_assignment(topo: Topology) -> dict[PoolRole, list[list[int]]]:
    """Global GPU ids per worker of each pool (node n holds n*gpus_per_node ...): the pools'
    explicit `gpu_ids`, else packed in pool order without splitting a worker across nodes."""
    return pack_gpus(topo.active_pools(), topo.hardware.gpus_per_node, topo.node_gpus())


def worker_slots(topo: Topology) -> list[WorkerSlot]:
    """Every worker `up` starts, with its node, local GPU ids and system port (the base plus
    its place in pool order), in pool order. A graph changed while it serves keeps each
    worker's slot (its run directory's plan says them: launch/live_layout.py)."""
    per_node = topo.hardware.gpus_per_node
    base = topo.observability.system_port_base
    slots = []
    for role, ids_per_worker in gpu_assignment(topo).items():
        for index, ids in enumerate(ids_per_worker):
            slots.append(WorkerSlot(role=role, index=index, node=ids[0] // per_node,
                                    gpus=tuple(g % per_node for g in ids),
                                    port=base + len(slots)))
    return slots


def nodes_from_head(topo: Topology) -> list[int]:
    """Node indices in the order services are spread over them: the head first, then the
    nodes after it, wrapping around."""
    count, head = len(topo.node_gpus()), topo.placement.head_index
    return [(head + i) % count for i in range(count)]


def service_slots(topo: Topology) -> dict[int, list[ServiceSlot]]:
    """Node index -> its services, in start order: etcd members on the first
    `etcd_members` nodes from the head on, a NATS member on each of `nats_members`, frontend
    replicas on the first `frontend_replicas`; with a balancer (`frontend.balancer`, which
    several replicas need), one on each node that has a replica (and its share of the
    floating address when there is one): each on its own node, so that losing a node loses
    one of each."""
    order = nodes_from_head(topo)
    replicas = topo.frontend_replicas
    entry = (ProcessKind.BALANCER,) + (
        (ProcessKind.VRRP,) if topo.frontend.floating_address is not None else ())
    entry_nodes = min(replicas, len(order)) if topo.frontend.balancer else 0
    counts = [(ProcessKind.ETCD, topo.etcd_members), (ProcessKind.NATS, topo.nats_members),
              (ProcessKind.FRONTEND, replicas), *((kind, entry_nodes) for kind in entry)]
    placed: dict[int, list[ServiceSlot]] = {i: [] for i in order}
    for kind, count in counts:
        for index in range(count):
            placed[order[index % len(order)]].append(ServiceSlot(kind, index, count))
    return placed


def node_layout(topo: Topology, slots: list[WorkerSlot] | None = None) -> list[NodeLayout]:
    """Each node's processes: `slots` (default: the workers `up` starts) and its services."""
    slots = worker_slots(topo) if slots is None else slots
    head = topo.placement.head_index
    services = service_slots(topo)
    layout = []
    for index, gpus in enumerate(topo.node_gpus()):
        name, address = topo.placement.node_identity(index)
        layout.append(NodeLayout(index=index, name=name, address=address, gpus=gpus,
                                 head=index == head,
                                 workers=tuple(s for s in slots if s.node == index),
                                 slots=tuple(services[index])))
    return layout


def kv_transfer_mib(topo: Topology) -> float:
    """KV cache of the longest prompt: what one request ships from prefill to decode."""
    arch = topo.model.resolved_architecture()
    per_token = kv_bytes_per_token(arch, topo.model.kv_cache_dtype.bytes_per_element)
    return per_token * topo.model.max_input_tokens / MIB


def _beyond_loopback(address: str | None) -> bool:
    return address is None or not (address.startswith("127.") or address in ("localhost",
                                                                               "::1"))


def placement_warnings(topo: Topology) -> list[str]:
    """What is allowed but costs something: services open to the cluster network without
    authentication, KV cache crossing nodes over TCP."""
    kind = topo.placement.kind
    if not kind.multi_node:
        return []
    layout = node_layout(topo)
    head = next(n for n in layout if n.head)
    where = head.address or "the head node's address (resolved when the job runs)"
    warnings = []
    if _beyond_loopback(head.address):
        if topo.coordination.etcd.mode is EtcdMode.EMBEDDED:
            warnings.append(f"etcd listens on {where} without authentication: anyone on the "
                            "cluster network can read and change service discovery; keep "
                            "that network private")
        nats = topo.coordination.nats
        if nats.mode is NatsMode.EMBEDDED and nats.auth is None:
            warnings.append(f"NATS listens on {where} without authentication; set "
                            "coordination.nats.auth.token_file (or token_env)")
    warnings += _kv_crossing_warnings(topo, layout) + _entry_warnings(topo, where)
    return warnings


def _entry_warnings(topo: Topology, where: str) -> list[str]:
    """Replicas whose one address is the head's balancer: the head's loss ends serving."""
    front = topo.frontend
    if topo.frontend_replicas < 2 or front.floating_address or front.balancer_url:
        return []
    return [f"clients reach the {topo.frontend_replicas} frontend replicas through the head "
            f"node's balancer at {where}, which does not survive the head node; set "
            "frontend.floating_address (an unused address of the nodes' network, moved by "
            "VRRP) or frontend.balancer_url (your own load balancer in front of every node's)"]


def _kv_crossing_warnings(topo: Topology, layout: list[NodeLayout]) -> list[str]:
    if topo.placement.interconnect is not KvInterconnect.TCP:
        return []
    prefill = {w.node for n in layout for w in n.workers if w.role is PoolRole.PREFILL}
    decode = {w.node for n in layout for w in n.workers if w.role is PoolRole.DECODE}
    if not prefill or not decode or len(prefill | decode) == 1:
        return []
    size = kv_transfer_mib(topo)
    seconds = size * MIB * 8 / (TCP_REFERENCE_GBITS * 1e9)
    return [f"prefill (nodes {_names(layout, prefill)}) and decode (nodes "
            f"{_names(layout, decode)}) are on different nodes and placement.interconnect is "
            f"tcp: each request of {topo.model.max_input_tokens} input tokens ships "
            f"{size:.0f} MiB of KV cache ({seconds * 1000:.0f} ms at "
            f"{TCP_REFERENCE_GBITS:g} Gb/s); use RDMA (interconnect: rdma) or co-locate them"]


def _names(layout: list[NodeLayout], nodes: set[int]) -> str:
    return ", ".join(layout[i].name for i in sorted(nodes))
