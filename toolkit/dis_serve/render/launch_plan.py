"""Topology -> local launch plan: every process as argv, env, ports, GPUs and readiness probe.

Pure: no processes, no files, no environment reads. The launcher executes the plan; the
shell-script renderer prints the same plan for people who start things by hand.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..topology import Backend, EtcdMode, NatsMode, PoolRole, ProcessKind, Supervision, Topology
from .dynamo_argv import LOOPBACK, TargetParams, dynamo_env, frontend_argv, worker_argv

ENGINE_CONFIG_DIR = "engine-configs"


class ProbeKind(StrEnum):
    HTTP = "http"
    TCP = "tcp"


class Readiness(BaseModel):
    """How the launcher knows a process is ready."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: ProbeKind
    url: str | None = Field(default=None, description="HTTP URL that answers 200 when ready.")
    port: int | None = Field(default=None, description="TCP port that accepts when ready.")


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


class RenderContext(BaseModel):
    """Where things live on the launching machine; the only inputs besides the topology."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    run_dir: Path = Field(description="The graph's run directory (logs, data, configs).")
    python: str = Field(default="python3", description="Interpreter that runs Dynamo.")
    etcd_bin: str = Field(default="etcd")
    nats_bin: str = Field(default="nats-server")
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

    def process(self, name: str) -> ProcessSpec:
        for spec in self.processes:
            if spec.name == name:
                return spec
        raise KeyError(name)

    @property
    def workers(self) -> list[ProcessSpec]:
        return [p for p in self.processes if p.kind is ProcessKind.WORKER]


def client_host(bind_host: str) -> str:
    """Where a client on this machine reaches a server bound to `bind_host`."""
    return LOOPBACK if bind_host in ("0.0.0.0", "::") else bind_host  # noqa: S104


def _etcd(topo: Topology, ctx: RenderContext) -> ProcessSpec:
    etcd = topo.coordination.etcd
    client = f"http://{LOOPBACK}:{etcd.client_port}"
    peer = f"http://{LOOPBACK}:{etcd.peer_port}"
    return ProcessSpec(
        name="etcd", kind=ProcessKind.ETCD,
        argv=[ctx.etcd_bin, "--name", topo.namespace,
              "--data-dir", str(ctx.run_dir / "etcd-data"),
              "--listen-client-urls", client, "--advertise-client-urls", client,
              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
              "--initial-cluster", f"{topo.namespace}={peer}",
              "--log-level", "warn"],
        ports={"client": etcd.client_port, "peer": etcd.peer_port},
        readiness=Readiness(kind=ProbeKind.HTTP, url=f"{client}/health"),
    )


def _nats(topo: Topology, ctx: RenderContext) -> ProcessSpec:
    port = topo.coordination.nats.port
    return ProcessSpec(
        name="nats", kind=ProcessKind.NATS,
        argv=[ctx.nats_bin, "-a", LOOPBACK, "-p", str(port), "-js",
              "-sd", str(ctx.run_dir / "nats-data")],
        ports={"client": port},
        readiness=Readiness(kind=ProbeKind.TCP, port=port),
    )


def _frontend(topo: Topology, target: TargetParams) -> ProcessSpec:
    probe_host = client_host(topo.frontend.host)
    return ProcessSpec(
        name="frontend", kind=ProcessKind.FRONTEND,
        argv=frontend_argv(topo, target),
        env=dynamo_env(topo, target),
        ports={"http": topo.frontend.port},
        readiness=Readiness(kind=ProbeKind.HTTP,
                            url=f"http://{probe_host}:{topo.frontend.port}/health"),
    )


def engine_config_path(run_dir: Path, role: PoolRole) -> Path:
    return run_dir / ENGINE_CONFIG_DIR / f"{role.value}.yaml"


def _workers(topo: Topology, target: TargetParams) -> list[ProcessSpec]:
    assignment = topo.gpu_assignment()
    per_node = topo.hardware.gpus_per_node
    port = topo.observability.system_port_base
    specs = []
    for role, pool in topo.active_pools():
        for index in range(pool.workers):
            global_ids = assignment[role][index]
            node = global_ids[0] // per_node
            local_ids = [g % per_node for g in global_ids]
            env = dynamo_env(topo, target) | {
                "DYN_SYSTEM_PORT": str(port),
                # Without it a 1.6.1 worker's /health never leaves "notready", although
                # Dynamo logs the variable as deprecated.
                "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS": '["generate"]',
            }
            if topo.backend.needs_gpu:
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in local_ids)
            specs.append(ProcessSpec(
                name=f"{role.value}-{index}", kind=ProcessKind.WORKER, role=role,
                argv=worker_argv(topo, role, target),
                env=env, ports={"system": port}, node=node,
                gpus=local_ids if topo.backend.needs_gpu else [],
                readiness=Readiness(kind=ProbeKind.HTTP,
                                    url=f"http://{target.advertise_host}:{port}/health"),
            ))
            port += 1
    return specs


def render_launch_plan(topo: Topology, ctx: RenderContext) -> LaunchPlan:
    model_path = ctx.model_path or topo.model.id
    needs_card = topo.backend is Backend.MOCKER and ctx.model_path is None
    if needs_card:
        model_path = str(ctx.run_dir / "model-card")
    processes: list[ProcessSpec] = []
    if topo.coordination.etcd.mode is EtcdMode.EMBEDDED:
        processes.append(_etcd(topo, ctx))
    if topo.coordination.nats.mode is NatsMode.EMBEDDED:
        processes.append(_nats(topo, ctx))
    target = TargetParams.local(topo, python=ctx.python, model_path=model_path,
                                engine_config_dir=str(ctx.run_dir / ENGINE_CONFIG_DIR))
    processes.append(_frontend(topo, target))
    processes.extend(_workers(topo, target))
    url_host = client_host(topo.frontend.host)
    engine_configs = {}
    if topo.backend.uses_engine_config:
        engine_configs = {role.value: str(engine_config_path(ctx.run_dir, role))
                          for role, _ in topo.active_pools()}
    return LaunchPlan(
        name=topo.name, namespace=topo.namespace, run_dir=ctx.run_dir,
        endpoint=f"http://{url_host}:{topo.frontend.port}", model_name=topo.model.name,
        model_path=model_path, needs_model_card=needs_card, engine_configs=engine_configs,
        processes=processes, supervision=topo.supervision)
