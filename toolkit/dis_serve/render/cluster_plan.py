"""Topology -> the processes of each node of a multi-node graph (hosts and Slurm targets).

Every process is built from the topology by the same builders as the local plan, with its
own node's parameters: it listens on and advertises its node's address, finds etcd and NATS
on the head node, and never points at loopback on another machine. Addresses unknown until
the job runs (Slurm) are run-time variables (`shell_words.runtime`). Pure.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..engines import engine_for
from ..security.pki_files import EndpointTls, PkiPaths
from ..topology import EtcdMode, NatsMode, Topology
from .dynamo_argv import TargetParams
from .launch_plan import LaunchPlan, ProcessSpec, etcd_spec, nats_config, nats_spec, worker_spec
from .launch_plan import frontend_spec as _frontend_spec
from .node_layout import NodeLayout, node_layout, worker_slots
from .run_layout import ENGINE_CONFIG_DIR, MODEL_CARD_DIR, NATS_CONFIG
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


def _frontend_host(topo: Topology, head_address: str) -> str:
    # Multi-node: the frontend listens on the head's cluster address unless the topology
    # names an address itself.
    return topo.frontend.host or head_address


def node_target(topo: Topology, ctx: ClusterContext, model_path: str, head: str,
                address: str, tls: PkiPaths | None = None) -> TargetParams:
    """Dynamo's parameters for a process on the node at `address`: it listens on and
    advertises that address and finds etcd and NATS on the head node; with `tls` (the
    node's files), every plane the graph runs itself is mutual TLS, and the frontend (on the
    head) serves HTTPS with the node's certificate where `frontend_https` says so."""
    coord = topo.coordination
    etcd = (f"{'https' if tls else 'http'}://{head}:{coord.etcd.client_port}"
            if coord.etcd.mode is EtcdMode.EMBEDDED else coord.etcd.url)
    # Dynamo 1.6.1 refuses NATS TLS settings with a nats:// server.
    nats = {NatsMode.EMBEDDED: f"{'tls' if tls else 'nats'}://{head}:{coord.nats.port}",
            NatsMode.EXTERNAL: coord.nats.url, NatsMode.OFF: None}[coord.nats.mode]
    tls_env = dynamo_tls_env(tls, nats=coord.nats.mode is NatsMode.EMBEDDED) if tls else {}
    return TargetParams(
        python=ctx.python, namespace=topo.namespace,
        http_host=_frontend_host(topo, head), http_port=topo.frontend.port,
        model_path=model_path, engine_config_dir=f"{ctx.run_dir}/{ENGINE_CONFIG_DIR}",
        router_policy_config=topo.router.policy_config, advertise_host=address,
        etcd_endpoints=etcd, nats_server=nats, tls_env=tls_env,
        frontend_tls=frontend_tls_files(topo.security, tls, topo.frontend_https))


def _head_processes(topo: Topology, ctx: ClusterContext, target: TargetParams,
                    head: str, tls: PkiPaths | None) -> list[ProcessSpec]:
    """etcd and NATS (the head's agent writes NATS's config: launch/node_tls.py), the
    frontend."""
    coord = topo.coordination
    data = runtime(DATA_DIR_VAR)  # node-local, never the shared run directory
    specs = []
    if coord.etcd.mode is EtcdMode.EMBEDDED:
        specs.append(etcd_spec(topo, ctx.etcd_bin, head, f"{data}/etcd-data", tls))
    if coord.nats.mode is NatsMode.EMBEDDED:
        config = (f"{ctx.run_dir}/{NATS_CONFIG}" if nats_config(topo, tls) is not None
                  else None)
        specs.append(nats_spec(topo, ctx.nats_bin, head, f"{data}/nats-data", config))
    specs.append(_frontend_spec(topo, target,
                                endpoint_tls(topo.security, tls, topo.frontend_https)))
    return specs


def render_cluster_plan(topo: Topology, ctx: ClusterContext) -> ClusterPlan:
    layout: list[NodeLayout] = node_layout(topo)
    if len(ctx.node_addresses) != len(layout):
        raise ValueError(f"{len(ctx.node_addresses)} addresses for {len(layout)} nodes")
    model_path, needs_card = _model_path(topo, ctx)
    head = next(n for n in layout if n.head)
    head_address = ctx.node_addresses[head.index]
    # System ports follow pool order, as in the local plan (so the validated ports hold).
    ports = {slot.name: topo.observability.system_port_base + i
             for i, slot in enumerate(worker_slots(topo))}
    nodes = []
    for node in layout:
        address = ctx.node_addresses[node.index]
        tls = node_pki(topo.security, ctx.run_dir, node.name)
        target = node_target(topo, ctx, model_path, head_address, address, tls)
        specs = _head_processes(topo, ctx, target, address, tls) if node.head else []
        for slot in node.workers:
            specs.append(worker_spec(topo, slot, target, ports[slot.name]))
        nodes.append(NodeProcesses(index=node.index, name=node.name, address=address,
                                   head=node.head, processes=specs))
    http_host = _frontend_host(topo, head_address)
    url_host = head_address if http_host in ("0.0.0.0", "::") else http_host  # noqa: S104
    client_tls = endpoint_tls(topo.security, node_pki(topo.security, ctx.run_dir, head.name),
                              topo.frontend_https)
    scheme = "https" if client_tls else "http"
    return ClusterPlan(
        name=topo.name, namespace=topo.namespace, endpoint_tls=client_tls,
        endpoint=f"{scheme}://{url_host}:{topo.frontend.port}", model_name=topo.model.name,
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
        endpoint_tls=plan.endpoint_tls_with(values),
        model_path=resolve_runtime(plan.model_path, values),
        needs_model_card=plan.needs_model_card, processes=processes)
