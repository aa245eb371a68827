"""Topology -> the processes of each node of a multi-node graph (hosts and Slurm targets).

Every process is built from the topology by the same builders as the local plan, with its
own node's parameters: it listens on and advertises its node's address, finds etcd at every
member and NATS at its own node's member, and never points at loopback on another machine.
The services are spread over the nodes from the head on (node_layout.service_slots): etcd
members, a NATS member per node, frontend replicas with their balancers and the floating
address, so that the loss of any one node loses one of each. Addresses unknown until the
job runs (Slurm) are run-time variables (`shell_words.runtime`). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..engines import engine_for
from ..security.pki_files import EndpointTls, PkiPaths
from ..topology import EtcdMode, NatsMode, ProcessKind, Topology
from .dynamo_argv import TargetParams
from .launch_plan import (
    EtcdMember,
    LaunchPlan,
    ProcessSpec,
    balancer_spec,
    etcd_spec,
    nats_config,
    nats_config_name,
    nats_spec,
    planner_specs,
    router_url,
    vrrp_spec,
    worker_spec,
)
from .launch_plan import frontend_spec as _frontend_spec
from .node_layout import NodeLayout, ServiceSlot, WorkerSlot, node_layout
from .run_layout import ENGINE_CONFIG_DIR, MODEL_CARD_DIR
from .shell_words import runtime
from .tls_planes import (
    dynamo_tls_env,
    endpoint_tls,
    frontend_tls_files,
    generates_nats_token,
    node_pki,
)

# The run-time variable for the head node's node-local directory of etcd's and NATS's data
# (coordination.data_dir): the head's agent makes it and sets it (launch/node_data.py).
DATA_DIR_VAR = "COORDINATION_DATA_DIR"


class ClusterContext(BaseModel):
    """What differs between cluster targets besides the topology."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_dir: str = Field(description="Run directory as the scripts see it (may be a "
                                     "run-time variable).")
    node_addresses: list[str] = Field(description="Each node's address (or run-time "
                                                  "variable), in node order.")
    python: str = "python3"
    etcd_bin: str = "etcd"
    nats_bin: str = "nats-server"
    haproxy_bin: str = "haproxy"
    keepalived_bin: str = "keepalived"
    model_path: str | None = Field(
        default=None, description="Model directory on every node (default: model.id; mocker "
                                  "without a local card: RUN_DIR/model-card).")


class NodeProcesses(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    index: int
    name: str
    address: str
    head: bool
    processes: list[ProcessSpec] = Field(description="In start order.")


class ClusterPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    namespace: str
    endpoint: str = Field(description="The frontend's base URL (may hold run-time variables).")
    endpoint_tls: EndpointTls | None = Field(
        default=None, description="What our clients of an HTTPS frontend use: the graph's CA "
                                  "(and client certificate), as the nodes see them.")
    model_name: str
    model_path: str
    needs_model_card: bool
    nats_token: bool = Field(description="NATS token authentication is on.")
    nodes: list[NodeProcesses]
    revision: int = Field(
        default=0, exclude_if=lambda revision: revision == 0,
        description="Raised by every change of the running graph; each node's agent "
                    "reconciles its share to it.")

    @property
    def head(self) -> NodeProcesses:
        return next(n for n in self.nodes if n.head)

    def endpoint_tls_with(self, values: dict[str, str]) -> EndpointTls | None:
        """`endpoint_tls` with its run-time variables set (RUN_DIR: where this client sees
        the run directory)."""
        from .shell_words import resolve_runtime

        if self.endpoint_tls is None:
            return None
        return EndpointTls.model_validate(
            {k: v if v is None else resolve_runtime(v, values)
             for k, v in self.endpoint_tls.model_dump().items()})


def checkpoint_warning(topo: Topology) -> str | None:
    """`validate`'s warning for a graph whose workers load weights (not a model card), on
    several nodes, without model.path."""
    if engine_for(topo.backend).needs_model_card or topo.model.path is not None or not (
            topo.placement.kind.multi_node or topo.hardware.nodes > 1):
        return None
    return (f"model.path is not set: on hosts and Slurm the workers run offline and load "
            f"{topo.model.id} from each node's own Hugging Face cache; set model.path to the "
            "checkpoint directory on storage every node shares")


def _model_path(topo: Topology, ctx: ClusterContext) -> tuple[str, bool]:
    if ctx.model_path is not None:
        return ctx.model_path, False
    if topo.model.path is not None:  # the checkpoint on shared storage (NVIDIA's way)
        return topo.model.path, False
    if engine_for(topo.backend).needs_model_card:
        return f"{ctx.run_dir}/{MODEL_CARD_DIR}", True
    return topo.model.id, False


def _frontend_host(topo: Topology, head: str, address: str) -> str:
    # Multi-node: frontends behind the balancer listen on their own node's address (the
    # balancer binds frontend.host or the floating address); without one the lone frontend
    # listens on the head's cluster address unless the topology names an address itself.
    if topo.frontend.balancer:
        return address
    return topo.frontend.host or head


@dataclass(frozen=True)
class _Graph:
    """What every node's processes need to know of the others: each node's address (or
    run-time variable), and which nodes run which services."""

    topo: Topology
    ctx: ClusterContext
    layout: list[NodeLayout]
    model_path: str

    def address(self, index: int) -> str:
        return self.ctx.node_addresses[index]

    def nodes_with(self, kind: ProcessKind) -> list[NodeLayout]:
        """The nodes running a `kind` service, by the service's index."""
        found = [(slot.index, node) for node in self.layout for slot in node.slots
                 if slot.kind is kind]
        return [node for _, node in sorted(found, key=lambda pair: pair[0])]

    @property
    def head(self) -> NodeLayout:
        return next(n for n in self.layout if n.head)


def _scheme(tls: PkiPaths | None, secure: str, plain: str) -> str:
    return secure if tls else plain


def node_target(topo: Topology, ctx: ClusterContext, model_path: str, head: str,
                address: str, tls: PkiPaths | None = None, *,
                etcd_hosts: list[str] | None = None, nats_host: str | None = None,
                replica: int | None = None) -> TargetParams:
    """Dynamo's parameters for a process on the node at `address`: it listens on and
    advertises that address, finds etcd at every member (`etcd_hosts`, default the head)
    and NATS at `nats_host` (its own node's member; default the head's); with `tls` (the
    node's files), every plane the graph runs itself is mutual TLS, and a frontend serves
    HTTPS with the node's certificate where `frontend_https` says so. `replica`: the frontend
    replica on this node, whose port it listens on."""
    coord = topo.coordination
    etcd = coord.etcd.url
    if coord.etcd.mode is EtcdMode.EMBEDDED:
        etcd = ",".join(f"{_scheme(tls, 'https', 'http')}://{host}:{coord.etcd.client_port}"
                        for host in etcd_hosts or [head])
    # Dynamo 1.6.1 refuses NATS TLS settings with a nats:// server.
    nats = {NatsMode.EMBEDDED: f"{_scheme(tls, 'tls', 'nats')}://{nats_host or head}:"
                               f"{coord.nats.port}",
            NatsMode.EXTERNAL: coord.nats.url, NatsMode.OFF: None}[coord.nats.mode]
    tls_env = dynamo_tls_env(tls, nats=coord.nats.mode is NatsMode.EMBEDDED) if tls else {}
    port = (topo.frontend.port if not topo.frontend.balancer or replica is None
            else topo.frontend.first_replica_port + replica)
    return TargetParams(
        python=ctx.python, namespace=topo.namespace,
        http_host=_frontend_host(topo, head, address),
        http_port=port, model_path=model_path,
        engine_config_dir=f"{ctx.run_dir}/{ENGINE_CONFIG_DIR}",
        router_policy_config=topo.router.policy_config, advertise_host=address,
        etcd_endpoints=etcd, nats_server=nats, tls_env=tls_env,
        frontend_tls=frontend_tls_files(topo.security, tls, topo.frontend_https),
        replica_sync=topo.frontend_replicas > 1)


def _target(graph: _Graph, node: NodeLayout, tls: PkiPaths | None,
            replica: int | None = None) -> TargetParams:
    """node_target for `node` of this graph: every etcd member, its own NATS member."""
    nats_node = node if ProcessKind.NATS in node.services else graph.head
    return node_target(
        graph.topo, graph.ctx, graph.model_path, graph.address(graph.head.index),
        graph.address(node.index), tls,
        etcd_hosts=[graph.address(n.index) for n in graph.nodes_with(ProcessKind.ETCD)],
        nats_host=graph.address(nats_node.index), replica=replica)


def _etcd(graph: _Graph, node: NodeLayout, slot: ServiceSlot,
          tls: PkiPaths | None) -> ProcessSpec:
    topo, data = graph.topo, runtime(DATA_DIR_VAR)  # node-local, never the run directory
    host = graph.address(node.index)
    if slot.count == 1:
        return etcd_spec(topo, graph.ctx.etcd_bin, host, f"{data}/etcd-data", tls)
    scheme, peer_port = _scheme(tls, "https", "http"), topo.coordination.etcd.peer_port
    members = [EtcdMember(name=n.name, peer_url=f"{scheme}://{graph.address(n.index)}:"
                                                f"{peer_port}")
               for n in graph.nodes_with(ProcessKind.ETCD)]
    return etcd_spec(topo, graph.ctx.etcd_bin, host, f"{data}/etcd-data", tls,
                     member=node.name, members=members, name=slot.name)


def _nats(graph: _Graph, node: NodeLayout, slot: ServiceSlot,
          tls: PkiPaths | None) -> ProcessSpec:
    """A NATS member (its agent writes its config: launch/node_configs.py)."""
    topo, data = graph.topo, runtime(DATA_DIR_VAR)
    config = (f"{graph.ctx.run_dir}/{nats_config_name(node.name, slot.count)}"
              if slot.count > 1 or nats_config(topo, tls) is not None else None)
    spec = nats_spec(topo, graph.ctx.nats_bin, graph.address(node.index), f"{data}/nats-data",
                     config)
    if slot.count == 1:
        return spec
    return spec.model_copy(update={
        "name": slot.name, "ports": {**spec.ports, "cluster": topo.coordination.nats.cluster_port}})


def _service_spec(graph: _Graph, node: NodeLayout, slot: ServiceSlot,
                  tls: PkiPaths | None) -> ProcessSpec:
    spec = _service(graph, node, slot, tls)
    return spec if slot.count == 1 else spec.model_copy(update={"replicas": slot.count})


def _service(graph: _Graph, node: NodeLayout, slot: ServiceSlot,
             tls: PkiPaths | None) -> ProcessSpec:
    topo = graph.topo
    if slot.kind is ProcessKind.ETCD:
        return _etcd(graph, node, slot, tls)
    if slot.kind is ProcessKind.NATS:
        return _nats(graph, node, slot, tls)
    if slot.kind is ProcessKind.FRONTEND:
        target = _target(graph, node, tls, replica=slot.index)
        spec = _frontend_spec(topo, target, endpoint_tls(topo.security, tls,
                                                         topo.frontend_https))
        if not topo.frontend.balancer:
            return spec
        return spec.model_copy(update={"name": slot.name,
                                       "ports": {"replica": target.http_port}})
    data = runtime(DATA_DIR_VAR)
    if slot.kind is ProcessKind.BALANCER:
        return balancer_spec(topo, config_dir=graph.ctx.run_dir, node=node.name,
                             data_dir=data, name=slot.name, haproxy=graph.ctx.haproxy_bin)
    return vrrp_spec(run_dir=graph.ctx.run_dir, node=node.name, data_dir=data,
                     name=slot.name, keepalived=graph.ctx.keepalived_bin)


def _endpoint(graph: _Graph, client_tls: EndpointTls | None) -> str:
    """The one address clients use: the site's balancer, the floating address, or the head
    node's balancer (or lone frontend)."""
    front = graph.topo.frontend
    if front.balancer_url is not None:
        return front.balancer_url.rstrip("/")
    head = graph.address(graph.head.index)
    if front.floating_address is not None:
        host = front.floating_address.address
    elif front.balancer:
        host = front.host or head
    else:
        host = _frontend_host(graph.topo, head, head)
    url_host = head if host in ("0.0.0.0", "::") else host  # noqa: S104
    return f"{'https' if client_tls else 'http'}://{url_host}:{front.port}"


def render_cluster_plan(topo: Topology, ctx: ClusterContext,
                        slots: list[WorkerSlot] | None = None) -> ClusterPlan:
    """Each node's processes; its workers in `slots` (default: those `up` starts)."""
    layout: list[NodeLayout] = node_layout(topo, slots)
    if len(ctx.node_addresses) != len(layout):
        raise ValueError(f"{len(ctx.node_addresses)} addresses for {len(layout)} nodes")
    model_path, needs_card = _model_path(topo, ctx)
    graph = _Graph(topo, ctx, layout, model_path)
    nodes = []
    for node in layout:
        tls = node_pki(topo.security, ctx.run_dir, node.name)
        specs = [_service_spec(graph, node, slot, tls) for slot in node.slots]
        target = _target(graph, node, tls)
        if node.head:  # the planner and its scaler (autoscale)
            specs += planner_specs(topo, target, ctx.run_dir)
        specs += [worker_spec(topo, slot, target) for slot in node.workers]
        nodes.append(NodeProcesses(index=node.index, name=node.name,
                                   address=graph.address(node.index), head=node.head,
                                   processes=specs))
    client_tls = endpoint_tls(topo.security, node_pki(topo.security, ctx.run_dir,
                                                      graph.head.name), topo.frontend_https)
    return ClusterPlan(
        name=topo.name, namespace=topo.namespace, endpoint_tls=client_tls,
        endpoint=_endpoint(graph, client_tls), model_name=topo.model.name,
        model_path=model_path, needs_model_card=needs_card,
        nats_token=topo.coordination.nats.auth is not None or generates_nats_token(topo),
        nodes=nodes)


def resolved_launch_plan(plan: ClusterPlan, values: dict[str, str], run_dir: Path) -> LaunchPlan:
    """The plan with the addresses a running job found (see `shell_words.runtime`), as a
    launch plan whose probes `probes` can run from here."""
    from .shell_words import resolve_runtime

    def fix(value: object) -> object:
        if isinstance(value, str):
            return resolve_runtime(value, values)
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    processes = [ProcessSpec.model_validate(fix(p.model_dump(mode="json")))
                 for node in plan.nodes for p in node.processes]
    return LaunchPlan(
        name=plan.name, namespace=plan.namespace, run_dir=run_dir,
        endpoint=resolve_runtime(plan.endpoint, values), model_name=plan.model_name,
        endpoint_tls=plan.endpoint_tls_with(values), router_url=router_url(processes),
        model_path=resolve_runtime(plan.model_path, values),
        needs_model_card=plan.needs_model_card, processes=processes, revision=plan.revision)
