"""The run record: what a run is and where it runs, written once by the handle that starts it
(`run.json` in the run directory) and read by every verb after: `status`, `logs`, `down`,
`fault`, `top`, `doctor`, `bench`. Nothing is inferred from which files a run directory
holds or by parsing a generated command back (STYLE.md 23).

A graph that changes while it serves (workers added, removed or rolled; issue 28) writes a
new record with `revision` one higher beside the topology it now runs, so a restarted
supervisor or agent starts what the record says, not what the first `up` rendered. Several
frontends or etcd/NATS members on different nodes (issue 29) are listed in `endpoints` and on
their nodes' `services`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import time
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ..render.node_layout import node_layout
from ..render.tls_planes import graph_pki_paths
from ..security.pki_files import EndpointTls, PkiPaths
from ..topology import Backend, EtcdMode, NatsMode, PlacementKind, ProcessKind, Topology

RECORD_VERSION = 1
# The distributions whose versions make a run what it is.
RECORDED_DISTRIBUTIONS = ("dis-serve", "ai-dynamo", "ai-dynamo-runtime")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RecordedNode(_Frozen):
    name: str
    address: str | None = Field(
        description="Cluster-facing address; a run-time variable (${NAME}) or None where it "
                    "is resolved on the node when the run starts (the agents' plan-<node>.json "
                    "and a Slurm job's `addresses` then say it).")
    head: bool = Field(description="Runs the graph's etcd, NATS and frontend.")
    services: list[ProcessKind] = Field(
        default_factory=list, description="The processes besides workers on this node, in "
                                          "start order.")


class RecordedEndpoints(_Frozen):
    frontend: str = Field(description="The OpenAI endpoint's base URL clients use (may hold "
                                      "run-time variables until the graph has served).")
    etcd: list[str] = Field(default_factory=list,
                            description="etcd client URLs, one per member (none: no etcd).")
    nats: list[str] = Field(default_factory=list,
                            description="NATS server URLs, one per member (none: NATS off).")


class RecordedTls(_Frozen):
    planes: PkiPaths | None = Field(
        default=None, description="What dis-serve's clients of the etcd and NATS the graph "
                                  "runs itself present and trust (None: those planes are "
                                  "plain).")
    frontend: EndpointTls | None = Field(
        default=None, description="What a client of an HTTPS frontend needs, as this "
                                  "machine sees the run directory.")


class RunRecord(_Frozen):
    version: int = Field(default=RECORD_VERSION, description="Of this record's format.")
    revision: int = Field(default=0, description="Raised by every change of the running "
                                                 "graph (none yet: 0).")
    name: str
    namespace: str = Field(description="Dynamo namespace of the graph.")
    placement: PlacementKind
    engine: Backend
    model_name: str
    run_dir: str
    balancer_dir: str | None = Field(
        default=None, exclude_if=lambda path: path is None,
        description="A local graph's own private directory outside the run directory "
                    "(launch/node_data.py): its balancer's sockets and the files haproxy "
                    "restarts from, so that deleting the run directory costs the balancer "
                    "nothing; removed by every stop. None: no balancer, or a multi-node "
                    "graph (each node's agent keeps its own data directory).")
    started_at: float = Field(description="Unix time the handle started the run (sbatch "
                                          "returned; `up` or `prepare` began).")
    job_id: str | None = Field(default=None, description="The scheduler's id of the run "
                                                         "(Slurm's job id).")
    nodes: list[RecordedNode]
    endpoints: RecordedEndpoints
    tls: RecordedTls = Field(default_factory=RecordedTls)
    processes: list[str] = Field(description="Process names, in start order.")
    versions: dict[str, str] = Field(default_factory=dict)


def installed_versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in RECORDED_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def plane_urls(topo: Topology, nodes: list[RecordedNode] | None) -> tuple[list[str], list[str]]:
    """(etcd, NATS) client URLs as the graph's clients reach them: the topology's, with the
    servers the graph runs itself at every member's node address (`nodes`: a multi-node
    graph's; None: this machine's loopback, as the topology says), in the scheme they speak."""
    coord = topo.coordination
    tls = graph_pki_paths(topo.security, ".") is not None

    def members(url: str, kind: ProcessKind, port: int, embedded: bool,
                secure: str) -> list[str]:
        if nodes is None or not embedded:
            return [url]
        scheme = secure if tls else urlsplit(url).scheme
        return [urlsplit(url)._replace(scheme=scheme, netloc=f"{n.address}:{port}").geturl()
                for n in nodes if kind in n.services]

    etcd = members(coord.etcd.client_url, ProcessKind.ETCD, coord.etcd.client_port,
                   coord.etcd.mode is EtcdMode.EMBEDDED, "https")
    nats = coord.nats.client_url
    return etcd, [] if nats is None else members(
        nats, ProcessKind.NATS, coord.nats.port, coord.nats.mode is NatsMode.EMBEDDED, "tls")


def recorded_nodes(topo: Topology, addresses: list[str] | None = None) -> list[RecordedNode]:
    """The topology's nodes (render/node_layout.py), at `addresses` where the rendered plan
    names them (run-time variables included), else as the topology says."""
    return [RecordedNode(name=node.name, head=node.head, services=list(node.services),
                         address=node.address if addresses is None
                         else addresses[node.index])
            for node in node_layout(topo)]


def build_record(topo: Topology, *, placement: PlacementKind, run_dir: str, frontend: str,
                 frontend_tls: EndpointTls | None, processes: list[str],
                 addresses: list[str] | None = None, job_id: str | None = None,
                 started_at: float | None = None,
                 balancer_dir: str | None = None) -> RunRecord:
    """The record of a run of `topo` in `run_dir` (as this machine sees it); `addresses`
    are a multi-node plan's node addresses (its head's serves etcd and NATS);
    `balancer_dir` a local graph's own directory (RunRecord.balancer_dir)."""
    nodes = recorded_nodes(topo, addresses)
    etcd, nats = plane_urls(topo, nodes if placement.multi_node else None)
    coord = topo.coordination
    runs_planes = EtcdMode.EMBEDDED is coord.etcd.mode or coord.nats.mode is NatsMode.EMBEDDED
    return RunRecord(
        name=topo.name, namespace=topo.namespace, placement=placement, engine=topo.backend,
        model_name=topo.model.name, run_dir=run_dir, balancer_dir=balancer_dir,
        started_at=time.time() if started_at is None else started_at, job_id=job_id,
        nodes=nodes, endpoints=RecordedEndpoints(frontend=frontend, etcd=etcd, nats=nats),
        tls=RecordedTls(planes=graph_pki_paths(topo.security, run_dir) if runs_planes
                        else None, frontend=frontend_tls),
        processes=processes, versions=installed_versions())
