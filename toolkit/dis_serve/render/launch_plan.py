"""Topology -> local launch plan: every process as argv, env, ports, GPUs and readiness probe.

Pure: no processes, no files, no environment reads. The launcher executes the plan; the
shell-script renderer prints the same plan for people who start things by hand.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..topology import (
    Backend,
    EtcdMode,
    NatsMode,
    PoolRole,
    Restart,
    Supervision,
    Topology,
)

LOOPBACK = "127.0.0.1"


class ProcessKind(StrEnum):
    ETCD = "etcd"
    NATS = "nats"
    FRONTEND = "frontend"
    WORKER = "worker"

    def restart_policy(self, supervision: Supervision) -> Restart:
        """This kind's restart policy in the topology's `supervision` section."""
        return getattr(supervision, "workers" if self is ProcessKind.WORKER else self.value)

    @property
    def serves_alone(self) -> bool:
        """The graph cannot serve without this very process (a worker has pool peers)."""
        return self is not ProcessKind.WORKER


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


def _dynamo_env(topo: Topology) -> dict[str, str]:
    """Environment every Dynamo process shares: where discovery lives, which planes, and
    loopback addresses so nothing advertises or binds the machine's public interface."""
    coord = topo.coordination
    env = {
        "DYN_NAMESPACE": topo.namespace,
        "ETCD_ENDPOINTS": coord.etcd.client_url,
        "DYN_DISCOVERY_BACKEND": "etcd",
        "DYN_REQUEST_PLANE": coord.request_plane.value,
        "DYN_EVENT_PLANE": coord.event_plane.value,
        "DYN_TCP_RPC_HOST": LOOPBACK,
        "DYN_TCP_RESPONSE_STREAM_HOST": LOOPBACK,
        "DYN_EVENT_PLANE_HOST": LOOPBACK,
        "DYN_SYSTEM_HOST": LOOPBACK,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    if (nats_url := coord.nats.client_url) is not None:
        env["NATS_SERVER"] = nats_url
    return env


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


def frontend_argv(topo: Topology, python: str) -> list[str]:
    router = topo.router
    argv = [python, "-m", "dynamo.frontend",
            "--http-host", topo.frontend.host, "--http-port", str(topo.frontend.port),
            "--namespace", topo.namespace,
            "--router-mode", router.mode.value,
            "--migration-limit", str(topo.frontend.migration_limit)]
    if router.mode.is_kv_aware:
        argv.append("--router-kv-events" if router.kv_events else "--no-router-kv-events")
        if router.policy_config:
            argv += ["--router-policy-config", router.policy_config]
    return argv


def _frontend(topo: Topology, ctx: RenderContext) -> ProcessSpec:
    probe_host = client_host(topo.frontend.host)
    return ProcessSpec(
        name="frontend", kind=ProcessKind.FRONTEND,
        argv=frontend_argv(topo, ctx.python),
        env=_dynamo_env(topo),
        ports={"http": topo.frontend.port},
        readiness=Readiness(kind=ProbeKind.HTTP,
                            url=f"http://{probe_host}:{topo.frontend.port}/health"),
    )


def _component(role: PoolRole) -> str:
    # The components Dynamo's own launchers use: prefill workers register as "prefill",
    # decode and aggregated workers as "backend".
    return "prefill" if role is PoolRole.PREFILL else "backend"


def mocker_argv(topo: Topology, role: PoolRole, python: str, model_path: str) -> list[str]:
    pool = topo.pools.get(role)
    assert pool is not None
    mock = topo.mocker
    argv = [python, "-m", "dynamo.mocker",
            "--model-path", model_path, "--model-name", topo.model.name,
            "--endpoint", f"dyn://{topo.namespace}.{_component(role)}.generate",
            "--engine-type", "trtllm",
            "--disaggregation-mode", role.disaggregation_mode,
            "--max-num-seqs", str(pool.max_batch_size),
            "--max-num-batched-tokens", str(pool.max_num_tokens),
            "--max-model-len", str(topo.model.max_seq_len),
            "--block-size", str(topo.kv_cache.block_size),
            "--kv-cache-dtype", topo.model.kv_cache_dtype.mocker_dtype,
            "--speedup-ratio", f"{mock.speedup_ratio:g}"]
    if mock.num_gpu_blocks is not None:
        argv += ["--num-gpu-blocks-override", str(mock.num_gpu_blocks)]
    if mock.kv_transfer_bandwidth_gbps is not None and role is not PoolRole.AGG:
        argv += ["--kv-transfer-bandwidth", f"{mock.kv_transfer_bandwidth_gbps:g}"]
    if mock.profile_data is not None:
        argv += ["--planner-profile-data", mock.profile_data]
    return argv


def trtllm_argv(topo: Topology, role: PoolRole, python: str, model_path: str,
                engine_config: str) -> list[str]:
    pool = topo.pools.get(role)
    assert pool is not None
    argv = [python, "-m", "dynamo.trtllm",
            "--model", model_path, "--served-model-name", topo.model.name,
            "--namespace", topo.namespace,
            "--disaggregation-mode", role.disaggregation_mode,
            "--extra-engine-args", engine_config,
            "--tensor-parallel-size", str(pool.tensor_parallel),
            "--max-batch-size", str(pool.max_batch_size),
            "--max-num-tokens", str(pool.max_num_tokens),
            "--max-seq-len", str(topo.model.max_seq_len),
            "--free-gpu-memory-fraction", f"{pool.free_gpu_memory_fraction:g}",
            "--publish-metrics"]
    if role.publishes_kv_events and topo.router.mode.is_kv_aware:
        argv.append("--publish-kv-events")
    return argv


def engine_config_path(run_dir: Path, role: PoolRole) -> Path:
    return run_dir / "engine-configs" / f"{role.value}.yaml"


def _workers(topo: Topology, ctx: RenderContext, model_path: str) -> list[ProcessSpec]:
    assignment = topo.gpu_assignment()
    per_node = topo.hardware.gpus_per_node
    port = topo.observability.system_port_base
    specs = []
    for role, pool in topo.active_pools():
        for index in range(pool.workers):
            global_ids = assignment[role][index]
            node = global_ids[0] // per_node
            local_ids = [g % per_node for g in global_ids]
            env = _dynamo_env(topo) | {
                "DYN_SYSTEM_PORT": str(port),
                # Without it a 1.6.1 worker's /health never leaves "notready", although
                # Dynamo logs the variable as deprecated.
                "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS": '["generate"]',
            }
            if topo.backend is Backend.TRTLLM:
                argv = trtllm_argv(topo, role, ctx.python, model_path,
                                   str(engine_config_path(ctx.run_dir, role)))
                env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in local_ids)
            else:
                argv = mocker_argv(topo, role, ctx.python, model_path)
            specs.append(ProcessSpec(
                name=f"{role.value}-{index}", kind=ProcessKind.WORKER, role=role, argv=argv,
                env=env, ports={"system": port}, node=node,
                gpus=local_ids if topo.backend.needs_gpu else [],
                readiness=Readiness(kind=ProbeKind.HTTP, url=f"http://{LOOPBACK}:{port}/health"),
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
    processes.append(_frontend(topo, ctx))
    processes.extend(_workers(topo, ctx, model_path))
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
