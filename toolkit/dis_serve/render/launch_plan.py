"""Topology -> local launch plan: every process as argv, env, ports, GPUs and readiness probe.

Pure: no processes, no files, no environment reads. The launcher executes the plan; the
shell-script renderer prints the same plan for people who start things by hand.
"""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from ..engines import engine_for
from ..security.pki_files import EndpointTls, PkiPaths
from ..topology import (
    EtcdMode,
    NatsMode,
    PoolRole,
    ProcessKind,
    Supervision,
    Topology,
)
from .balancer import (
    MONITOR_SOCKET,
    MONITOR_URL,
    VRRP_PID_FILES,
    balancer_config_name,
    vrrp_config_name,
)
from .dynamo_argv import (
    LOOPBACK,
    PLANNER_MODULE,
    TargetParams,
    dynamo_env,
    frontend_argv,
    module_argv,
    worker_argv,
)
from .engine_config import engine_config_path
from .model_ready import model_ready_path
from .node_layout import WorkerSlot, worker_slots
from .planner_config import VIRTUAL, planner_config
from .run_layout import ENGINE_CONFIG_DIR, ETCD_DATA, MODEL_CARD_DIR, NATS_CONFIG, NATS_DATA
from .tls_planes import (
    endpoint_tls,
    etcd_tls_args,
    frontend_tls_files,
    generates_nats_token,
    graph_pki_paths,
    nats_tls_block,
)

# NATS token authentication: the variable Dynamo's runtime (and our nats.conf) reads the token
# from, and the server config that takes it from the server's environment. The token itself
# is never in a plan, a rendered file or an argv.
NATS_TOKEN_ENV = "NATS_AUTH_TOKEN"  # noqa: S105 (a variable name, not a secret)


def nats_token_config() -> str:
    """nats-server config: token authentication with the token from its environment."""
    return "authorization { token: $" + NATS_TOKEN_ENV + " }\n"


def nats_config_name(node: str, members: int) -> str:
    """The run directory's name of a NATS member's config: one per member of a cluster."""
    return NATS_CONFIG if members == 1 else f"nats-{node}.conf"


class NatsCluster(BaseModel):
    """A NATS member's place in the graph's NATS cluster: its server name (its node's),
    where it listens for the others' routes, and their route addresses."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    server_name: str
    listen: str = Field(description="host:port of this member's routes.")
    routes: list[str] = Field(description="host:port of every other member's routes.")


def nats_cluster_block(topo: Topology, cluster: NatsCluster, tls: PkiPaths | None) -> str:
    """nats-server's `server_name` and `cluster` block: routes to every other member (each
    node's processes connect to their own member; a client whose member dies moves to the
    others its member told it of), with mutual TLS on every route: a member presents the
    graph's certificate of its node and accepts only routes that present one too."""
    scheme = "tls" if tls else "nats-route"
    routes = ", ".join(json.dumps(f"{scheme}://{route}") for route in cluster.routes)
    lines = [f"server_name: {json.dumps(cluster.server_name)}",
             "cluster {",
             f"  name: {json.dumps(topo.namespace)}",
             f"  listen: {json.dumps(cluster.listen)}",
             f"  routes: [{routes}]"]
    if tls:
        lines += ["  " + line for line in nats_tls_block(tls).splitlines()]
    return "\n".join([*lines, "}", ""])


def nats_config(topo: Topology, tls: PkiPaths | None,
                cluster: NatsCluster | None = None) -> str | None:
    """The embedded NATS server's config file (a cluster member's with `cluster`), or None
    when it needs none."""
    token = topo.coordination.nats.auth is not None or generates_nats_token(topo)
    parts = ([nats_token_config()] if token else []) + (
        [nats_tls_block(tls)] if tls else []) + (
        [nats_cluster_block(topo, cluster, tls)] if cluster else [])
    return "".join(parts) or None


class ProbeKind(StrEnum):
    HTTP = "http"
    TCP = "tcp"
    RUNNING = "running"
    """Ready once started and alive while it runs (keepalived answers nothing)."""


class Readiness(BaseModel):
    """How the launcher knows a process is ready."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ProbeKind
    url: str | None = Field(default=None, description="HTTP URL that answers 200 when ready.")
    port: int | None = Field(default=None, description="TCP port that accepts when ready.")
    host: str | None = Field(default=None, description="Host of the TCP port (default: "
                                                       "loopback).")
    socket: str | None = Field(
        default=None, exclude_if=lambda socket: socket is None,
        description="A Unix socket the HTTP probe goes through (the balancer's monitor).")
    tls: EndpointTls | None = Field(
        default=None, exclude_if=lambda tls: tls is None,
        description="An https URL's CA (and client certificate) for the prober.")


class ProcessSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(description="Unique within the graph: etcd, nats, frontend, prefill-0...")
    kind: ProcessKind
    role: PoolRole | None = Field(default=None, description="Worker pool role.")
    argv: list[str]
    env: dict[str, str] = Field(default_factory=dict, description="Added to the environment.")
    ports: dict[str, int] = Field(default_factory=dict, description="Ports it listens on.")
    node: int = Field(default=0, description="Node index (multi-node graphs).")
    gpus: list[int] = Field(default_factory=list, description="GPU ids on its node.")
    readiness: Readiness
    replicas: int = Field(
        default=1, exclude_if=lambda count: count == 1,
        description="How many of its kind the graph runs (frontend replicas, etcd and NATS "
                    "members): a lone one is what the graph cannot serve without.")

    @property
    def probed_host(self) -> str:
        """The address it serves at, where its probe goes: the probe URL's host, the TCP
        probe's host, else loopback (a multi-node graph's etcd, NATS and workers listen on
        their node's address only)."""
        if self.readiness.url:
            return urlsplit(self.readiness.url).hostname or "127.0.0.1"
        return self.readiness.host or "127.0.0.1"

    @property
    def base_url(self) -> str:
        """scheme://host:port of its probe URL: where an HTTP server of the graph (a
        frontend replica) answers itself."""
        parts = urlsplit(self.readiness.url or "")
        return f"{parts.scheme}://{parts.netloc}"


class RenderContext(BaseModel):
    """Where things live on the launching machine; the only inputs besides the topology."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_dir: Path = Field(description="The graph's run directory (logs, data, configs).")
    python: str = Field(default="python3", description="Interpreter that runs Dynamo.")
    etcd_bin: str = Field(default="etcd")
    nats_bin: str = Field(default="nats-server")
    haproxy_bin: str = Field(default="haproxy")
    balancer_dir: Path | None = Field(
        default=None,
        description="Where the balancer keeps its Unix sockets, configuration and Lua: `up`'s "
                    "private directory outside the run directory (launch/node_data.py), so "
                    "that deleting the run directory costs the balancer nothing. Default: the "
                    "run directory (`render`'s launch.sh).")
    model_path: str | None = Field(
        default=None,
        description="Local model directory the workers load (mocker: the generated card). "
                    "Default: the topology's model.id.")


class LaunchPlan(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    namespace: str
    run_dir: Path
    endpoint: str = Field(description="Base URL of the OpenAI-compatible frontend.")
    # Left out of the JSON when None: a plain-HTTP graph's plan reads as it always did.
    endpoint_tls: EndpointTls | None = Field(
        default=None, exclude_if=lambda tls: tls is None,
        description="What a client of an https endpoint needs: the graph's CA (and the "
                    "client certificate when the frontend asks for one).")
    router_url: str | None = Field(
        default=None, exclude_if=lambda url: url is None,
        description="Base URL of a frontend itself (the first), where the supervisor reads "
                    "which workers the router sees, when `endpoint` is a balancer's: the "
                    "balancer holds requests while no frontend can route, which is when that "
                    "view matters (a frontend that lost the workers' registrations).")
    model_name: str
    model_path: str
    needs_model_card: bool = Field(
        description="True when the launcher must make a tokenizer-only card at model_path.")
    engine_configs: dict[str, str] = Field(
        default_factory=dict, description="Pool role -> engine config path the workers read.")
    processes: list[ProcessSpec] = Field(description="In start order; stop in reverse.")
    supervision: Supervision = Field(
        default_factory=Supervision,
        description="The topology's restart policies and liveness check.")
    revision: int = Field(
        default=0, exclude_if=lambda revision: revision == 0,
        description="Raised by every change of the running graph (change/executor.py); "
                    "the supervisor reconciles its processes to the plan's revision.")

    def process(self, name: str) -> ProcessSpec:
        for spec in self.processes:
            if spec.name == name:
                return spec
        raise KeyError(name)

    @property
    def workers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.kind is ProcessKind.WORKER]


def router_url(processes: list[ProcessSpec]) -> str | None:
    """LaunchPlan.router_url of a graph running `processes`: its first frontend's own base
    URL when a balancer stands in front of them."""
    if not any(p.kind is ProcessKind.BALANCER for p in processes):
        return None
    return next(p.base_url for p in processes if p.kind is ProcessKind.FRONTEND)


def client_host(bind_host: str, own_address: str = LOOPBACK) -> str:
    """Where a client reaches a server bound to `bind_host` on a machine whose address is
    `own_address` (loopback for a local graph)."""
    return own_address if bind_host in ("0.0.0.0", "::") else bind_host  # noqa: S104


class EtcdMember(BaseModel):
    """One member of a multi-member embedded etcd: its name and the peer URL the others reach
    it at (its node's address)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str
    peer_url: str


# etcd's own setting for how a member starts: a new cluster, or joining one that runs. The
# member's agent sets it (launch/etcd_members.py: a member whose data is gone rejoins).
ETCD_CLUSTER_STATE_ENV = "ETCD_INITIAL_CLUSTER_STATE"


def etcd_spec(topo: Topology, etcd_bin: str, host: str, data_dir: str,
              tls: PkiPaths | None = None, *, member: str | None = None,
              members: list[EtcdMember] | None = None, name: str = "etcd") -> ProcessSpec:
    """Embedded etcd listening (clients and peers) on `host` only; with `tls`, HTTPS with
    client certificates required of clients and peers. With `members`, this is member
    `member` of that cluster (named by node, one per node), bootstrapped with the graph's
    namespace as its token; else the graph's only member."""
    etcd = topo.coordination.etcd
    scheme = "https" if tls else "http"
    client = f"{scheme}://{host}:{etcd.client_port}"
    peer = f"{scheme}://{host}:{etcd.peer_port}"
    # /health over mutual TLS would need the client key in the prober: a TCP accept is what
    # Dynamo needs anyway (it connects, it does not wait for the election).
    readiness = (Readiness(kind=ProbeKind.TCP, port=etcd.client_port,
                           host=None if host == LOOPBACK else host) if tls
                 else Readiness(kind=ProbeKind.HTTP, url=f"{client}/health"))
    if members:
        assert member is not None
        cluster = ["--initial-cluster", ",".join(f"{m.name}={m.peer_url}" for m in members),
                   "--initial-cluster-token", topo.namespace]
        etcd_name = member
    else:
        cluster, etcd_name = ["--initial-cluster", f"{topo.namespace}={peer}"], topo.namespace
    return ProcessSpec(
        name=name, kind=ProcessKind.ETCD,
        argv=[etcd_bin, "--name", etcd_name, "--data-dir", data_dir,
              "--listen-client-urls", client, "--advertise-client-urls", client,
              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
              *cluster, *(etcd_tls_args(tls) if tls else []),
              "--log-level", "warn"],
        ports={"client": etcd.client_port, "peer": etcd.peer_port},
        readiness=readiness,
    )


def nats_spec(topo: Topology, nats_bin: str, host: str, store_dir: str,
              config: str | None = None) -> ProcessSpec:
    """Embedded NATS with JetStream on `host` only; `config` is a server config file (token
    authentication reads the token from the environment there)."""
    port = topo.coordination.nats.port
    argv = [nats_bin] + (["-c", config] if config else [])
    return ProcessSpec(
        name="nats", kind=ProcessKind.NATS,
        argv=[*argv, "-a", host, "-p", str(port), "-js", "-sd", store_dir],
        ports={"client": port},
        readiness=Readiness(kind=ProbeKind.TCP, port=port,
                            host=None if host == LOOPBACK else host),
    )


def frontend_spec(topo: Topology, target: TargetParams,
                  client_tls: EndpointTls | None = None) -> ProcessSpec:
    """The frontend, ready once it can route the graph's model (`model_ready_path`);
    `client_tls` is what probing its HTTPS needs (target.frontend_tls)."""
    probe_host = client_host(target.http_host, target.advertise_host)
    scheme = "https" if target.frontend_tls else "http"
    return ProcessSpec(
        name="frontend", kind=ProcessKind.FRONTEND,
        argv=frontend_argv(topo, target),
        env=dynamo_env(topo, target),
        ports={"http": target.http_port},
        readiness=Readiness(kind=ProbeKind.HTTP,
                            url=f"{scheme}://{probe_host}:{target.http_port}"
                                f"{model_ready_path(topo.model.name)}",
                            tls=client_tls),
    )


def worker_spec(topo: Topology, slot: WorkerSlot, target: TargetParams) -> ProcessSpec:
    """A worker on its node, with its engine's environment, its system port and its GPUs
    (recorded for the mocker too, which stands for them; only GPU backends are given
    CUDA_VISIBLE_DEVICES)."""
    port = slot.port
    env = {**engine_for(topo.backend).worker_env, **dynamo_env(topo, target),
           "DYN_SYSTEM_PORT": str(port),
           # Without it a 1.6.1 worker's /health never leaves "notready", although
           # Dynamo logs the variable as deprecated.
           "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS": '["generate"]'}
    if topo.backend.needs_gpu:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in slot.gpus)
    return ProcessSpec(
        name=slot.name, kind=ProcessKind.WORKER, role=slot.role,
        argv=worker_argv(topo, slot.role, target),
        env=env, ports={"system": port}, node=slot.node, gpus=list(slot.gpus),
        readiness=Readiness(kind=ProbeKind.HTTP,
                            url=f"http://{target.advertise_host}:{port}/health"),
    )


# dis-serve's own module the scaler runs (`dis-serve autoscaler RUN_DIR`, cli/agent_cmds.py).
SCALER_ARGS = ("-m", "dis_serve", "autoscaler")


def planner_specs(topo: Topology, target: TargetParams, run_dir: str) -> list[ProcessSpec]:
    """With `autoscale`: Dynamo's planner (`environment: virtual`), and dis-serve's scaler,
    the deployment that carries out and acknowledges its decisions (Dynamo's
    VirtualConnectorClient), both on the head node with the planes' environment every Dynamo
    process has (TLS files, NATS only where the graph runs it). None without."""
    scale = topo.autoscale
    if scale is None:
        return []
    base = dynamo_env(topo, target) | {
        "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS": '["generate"]'}
    if scale.resolved_target.reads_prometheus:
        base["PROMETHEUS_ENDPOINT"] = scale.prometheus_url
    config = json.dumps(planner_config(topo, VIRTUAL), sort_keys=True)
    specs = []
    for name, port_name, port, argv in (
            ("planner", "system", scale.system_port,
             module_argv(target.python, PLANNER_MODULE, ["--config", config])),
            ("scaler", "scaler", scale.system_port + 1,
             [target.python, *SCALER_ARGS, run_dir])):
        specs.append(ProcessSpec(
            name=name, kind=ProcessKind.PLANNER, argv=argv,
            env=base | {"DYN_SYSTEM_PORT": str(port)}, ports={port_name: port},
            readiness=Readiness(kind=ProbeKind.HTTP,
                                url=f"http://{target.advertise_host}:{port}/health")))
    return specs


def _frontends(topo: Topology, target: TargetParams, client_tls: EndpointTls | None,
               ctx: RenderContext) -> list[ProcessSpec]:
    """The frontend at frontend.port (`balancer: false`); else each replica on loopback at
    its replica port, and the balancer in front of them where the frontend would listen."""
    replicas = topo.local_frontend_replicas
    if not topo.frontend.balancer:
        return [frontend_spec(topo, target, client_tls)]
    specs = []
    for i in range(replicas):
        port = topo.frontend.first_replica_port + i
        spec = frontend_spec(topo, target.model_copy(update={"http_host": LOOPBACK,
                                                            "http_port": port}), client_tls)
        specs.append(spec.model_copy(update={
            "name": spec.name if replicas == 1 else f"frontend-{i}", "replicas": replicas,
            "ports": {"replica": port}}))
    own = str(ctx.balancer_dir or ctx.run_dir)
    return [*specs, balancer_spec(topo, config_dir=own, node=LOCAL_NODE, data_dir=own,
                                  name="balancer", haproxy=ctx.haproxy_bin)]


# The name a graph on one machine gives its only node (the balancer's config file).
LOCAL_NODE = "machine"


def balancer_spec(topo: Topology, *, config_dir: str, node: str, data_dir: str,
                  name: str, haproxy: str = "haproxy") -> ProcessSpec:
    """haproxy on `node` in front of every frontend replica, its configuration in
    `config_dir` (a cluster's shared run directory; a local graph's own directory); ready
    while its monitor says a replica can route (`haproxy -W`: the master this supervisor
    owns; `-db`: in the foreground). It works in `data_dir` (`-C`), where its Unix sockets
    are named relatively: haproxy takes socket paths of at most 97 bytes, shorter than many
    a run directory's."""
    config = (balancer_config_name(node) if config_dir == data_dir
              else f"{config_dir}/{balancer_config_name(node)}")
    return ProcessSpec(
        name=name, kind=ProcessKind.BALANCER,
        argv=[haproxy, "-W", "-db", "-C", data_dir, "-f", config],
        ports={"http": topo.frontend.port},
        readiness=Readiness(kind=ProbeKind.HTTP, url=MONITOR_URL,
                            socket=f"{data_dir}/{MONITOR_SOCKET}"))


def vrrp_spec(*, run_dir: str, node: str, data_dir: str, name: str,
              keepalived: str = "keepalived") -> ProcessSpec:
    """keepalived's VRRP on `node` (in the foreground, logging to its output), its pid files
    in the node's data directory."""
    pid, vrrp_pid = (f"{data_dir}/{f}" for f in VRRP_PID_FILES)
    return ProcessSpec(
        name=name, kind=ProcessKind.VRRP,
        argv=[keepalived, "-n", "-l", "--vrrp", "-f", f"{run_dir}/{vrrp_config_name(node)}",
              "-p", pid, "-r", vrrp_pid],
        readiness=Readiness(kind=ProbeKind.RUNNING))


def render_launch_plan(topo: Topology, ctx: RenderContext,
                       slots: list[WorkerSlot] | None = None) -> LaunchPlan:
    """The plan of `topo`, its workers in `slots` (default: those `up` starts)."""
    model_path = ctx.model_path or topo.model.id
    engine = engine_for(topo.backend)
    needs_card = engine.needs_model_card and ctx.model_path is None
    if needs_card:
        model_path = str(ctx.run_dir / MODEL_CARD_DIR)
    processes: list[ProcessSpec] = []
    tls = graph_pki_paths(topo.security, ctx.run_dir)
    if topo.coordination.etcd.mode is EtcdMode.EMBEDDED:
        processes.append(etcd_spec(topo, ctx.etcd_bin, LOOPBACK, str(ctx.run_dir / ETCD_DATA),
                                   tls))
    if topo.coordination.nats.mode is NatsMode.EMBEDDED:
        config = (str(ctx.run_dir / NATS_CONFIG) if nats_config(topo, tls) is not None
                  else None)
        processes.append(nats_spec(topo, ctx.nats_bin, LOOPBACK, str(ctx.run_dir / NATS_DATA),
                                   config))
    https = topo.frontend_https
    target = TargetParams.local(topo, python=ctx.python, model_path=model_path,
                                engine_config_dir=str(ctx.run_dir / ENGINE_CONFIG_DIR),
                                tls=tls, frontend_tls=frontend_tls_files(topo.security, tls,
                                                                         https))
    client_tls = endpoint_tls(topo.security, tls, https)
    processes += _frontends(topo, target, client_tls, ctx)
    processes.extend(worker_spec(topo, slot, target)
                     for slot in (worker_slots(topo) if slots is None else slots))
    processes.extend(planner_specs(topo, target, str(ctx.run_dir)))
    url_host = client_host(topo.frontend.local_host)
    engine_configs = {}
    if engine.uses_engine_config:
        engine_configs = {role.value: str(engine_config_path(ctx.run_dir, role))
                          for role, _ in topo.active_pools()}
    return LaunchPlan(
        name=topo.name, namespace=topo.namespace, run_dir=ctx.run_dir,
        endpoint=f"{'https' if https and tls else 'http'}://{url_host}:{topo.frontend.port}",
        endpoint_tls=client_tls, router_url=router_url(processes), model_name=topo.model.name,
        model_path=model_path, needs_model_card=needs_card, engine_configs=engine_configs,
        processes=processes, supervision=topo.supervision)
