"""The argv and environment of Dynamo's processes (frontend, workers), for every target.

A topology says what the graph is; a `TargetParams` says what differs where it runs: the
interpreter, the Dynamo namespace flag (Kubernetes' operator supplies its own), where the
frontend listens, where model and configs are, which address workers advertise and where
etcd and NATS are. Each target (the local launcher, per-node scripts, Kubernetes) passes its
own parameters to the same builders and never edits another target's argv. Pure.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..engines import engine_for
from ..security.pki_files import FrontendTlsFiles, PkiPaths
from ..topology import EtcdMode, NatsMode, PoolRole, Topology
from .engine_config import engine_config_name
from .tls_planes import dynamo_tls_env

LOOPBACK = "127.0.0.1"
FRONTEND_MODULE = "dynamo.frontend"
PLANNER_MODULE = "dynamo.planner"


class TargetParams(BaseModel):
    """The parts of a Dynamo process's argv and environment that vary by target."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    python: str = Field(default="python3", description="Interpreter that runs Dynamo.")
    namespace: str | None = Field(
        description="Dynamo namespace passed as --namespace and DYN_NAMESPACE; None where "
                    "the platform supplies it (Kubernetes: the operator).")
    http_host: str = Field(description="Address the frontend's HTTP server binds.")
    http_port: int = Field(description="The frontend's HTTP port.")
    model_path: str = Field(description="Model directory or id the workers load.")
    engine_config_dir: str = Field(
        description="Directory holding each pool role's engine config, ROLE.yaml.")
    router_policy_config: str | None = Field(
        default=None, description="Where the frontend reads the router policy YAML.")
    advertise_host: str = Field(
        default=LOOPBACK,
        description="Address workers bind and advertise for requests, responses, KV events "
                    "and their system port (a node's address on multi-node targets).")
    etcd_endpoints: str | None = Field(
        default=None, description="ETCD_ENDPOINTS; None where the platform supplies it.")
    nats_server: str | None = Field(
        default=None, description="NATS_SERVER; None without NATS or where the platform "
                                  "supplies it.")
    tls_env: dict[str, str] = Field(
        default_factory=dict,
        description="The planes' TLS settings (render/tls_planes.py): certificate paths.")
    frontend_tls: FrontendTlsFiles | None = Field(
        default=None,
        description="The frontend's HTTPS certificate, key and client CA (None: plain "
                    "HTTP), where this target puts them.")
    replica_sync: bool = Field(
        default=False,
        description="The frontend is one of several replicas: its KV router shares active "
                    "sequences with theirs (--router-replica-sync).")

    @classmethod
    def local(cls, topo: Topology, *, python: str, model_path: str,
              engine_config_dir: str, tls: PkiPaths | None = None,
              frontend_tls: FrontendTlsFiles | None = None) -> TargetParams:
        """Everything on this machine, on loopback, where the topology says; with `tls`,
        the embedded etcd speaks HTTPS and every plane mutual TLS; with `frontend_tls`,
        the frontend HTTPS."""
        etcd, nats = topo.coordination.etcd, topo.coordination.nats
        endpoints, nats_server = etcd.client_url, nats.client_url
        if tls and etcd.mode is EtcdMode.EMBEDDED:
            endpoints = f"https://127.0.0.1:{etcd.client_port}"
        # Dynamo 1.6.1 refuses NATS TLS settings with a nats:// server ("does not use the
        # 'tls://' scheme").
        if tls and nats.mode is NatsMode.EMBEDDED:
            nats_server = f"tls://127.0.0.1:{nats.port}"
        return cls(python=python, namespace=topo.namespace, http_host=topo.frontend.local_host,
                   http_port=topo.frontend.port, model_path=model_path,
                   replica_sync=topo.local_frontend_replicas > 1,
                   engine_config_dir=engine_config_dir,
                   router_policy_config=topo.router.policy_config,
                   etcd_endpoints=endpoints,
                   nats_server=nats_server,
                   tls_env=dynamo_tls_env(tls, nats=nats.mode is NatsMode.EMBEDDED)
                   if tls else {},
                   frontend_tls=frontend_tls)

    def engine_config(self, role: PoolRole) -> str:
        return f"{self.engine_config_dir}/{engine_config_name(role)}"


def module_argv(python: str, module: str, args: list[str]) -> list[str]:
    return [python, "-m", module, *args]


def frontend_args(topo: Topology, target: TargetParams) -> list[str]:
    """`dynamo.frontend`'s flags."""
    router = topo.router
    args = ["--http-host", target.http_host, "--http-port", str(target.http_port)]
    if target.namespace is not None:
        args += ["--namespace", target.namespace]
    args += ["--router-mode", router.mode.value,
             "--migration-limit", str(topo.frontend.migration_limit)]
    if router.mode.is_kv_aware:
        args.append("--router-kv-events" if router.kv_events else "--no-router-kv-events")
        if target.router_policy_config:
            args += ["--router-policy-config", target.router_policy_config]
        if target.replica_sync:
            # Best effort over the event plane (Dynamo 1.6.1): each replica still follows
            # every worker's KV events itself.
            args.append("--router-replica-sync")
    return args + frontend_tls_args(target.frontend_tls)


def frontend_tls_args(files: FrontendTlsFiles | None) -> list[str]:
    """Dynamo 1.6.1's frontend serves HTTPS given a certificate and key, and asks clients for
    a certificate signed by the client CA when one is given (mutual TLS)."""
    if files is None:
        return []
    args = ["--tls-cert-path", files.cert, "--tls-key-path", files.key]
    if files.client_ca is not None:
        args += ["--tls-client-ca-cert-path", files.client_ca]
    return args


def frontend_argv(topo: Topology, target: TargetParams) -> list[str]:
    return module_argv(target.python, FRONTEND_MODULE, frontend_args(topo, target))


def worker_args(topo: Topology, role: PoolRole, target: TargetParams) -> list[str]:
    """The flags of a worker of `role`, as the topology's engine builds them."""
    return engine_for(topo.backend).worker_args(topo, role, target)


def worker_argv(topo: Topology, role: PoolRole, target: TargetParams) -> list[str]:
    return module_argv(target.python, engine_for(topo.backend).module,
                       worker_args(topo, role, target))


def dynamo_env(topo: Topology, target: TargetParams) -> dict[str, str]:
    """Environment every Dynamo process shares: where discovery lives, which planes, and the
    address to advertise, so nothing binds or advertises an interface the target did not
    choose."""
    coord = topo.coordination
    env = {}
    if target.namespace is not None:
        env["DYN_NAMESPACE"] = target.namespace
    if target.etcd_endpoints is not None:
        env["ETCD_ENDPOINTS"] = target.etcd_endpoints
    env |= {
        "DYN_DISCOVERY_BACKEND": "etcd",
        "DYN_REQUEST_PLANE": coord.request_plane.value,
        "DYN_EVENT_PLANE": coord.event_plane.value,
        "DYN_TCP_RPC_HOST": target.advertise_host,
        "DYN_TCP_RESPONSE_STREAM_HOST": target.advertise_host,
        "DYN_EVENT_PLANE_HOST": target.advertise_host,
        "DYN_SYSTEM_HOST": target.advertise_host,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    if target.nats_server is not None:
        env["NATS_SERVER"] = target.nats_server
    return env | target.tls_env
