"""The topology's enums and what each value means to Dynamo: component names, worker types,
stop order, port keys. Callers ask an enum, never compare strings (one home per fact)."""

from __future__ import annotations

from enum import StrEnum

from .supervision import Restart, Supervision


class Backend(StrEnum):
    """The engine a graph's workers run, by the name users write. What each engine is (its
    argv, environment, image, configs, metrics) is its module's, dis_serve/engines/, which
    maps these names to modules."""

    TRTLLM = "trtllm"
    MOCKER = "mocker"

    @property
    def needs_gpu(self) -> bool:
        """Its workers hold weights and KV cache on GPUs: the one engine fact the schema's
        own rules read (memory fit, checkpoint format, Slurm GPUs), which sit below the
        engine modules."""
        return self is Backend.TRTLLM


DEFAULT_BACKEND = Backend.TRTLLM


class Mode(StrEnum):
    AGG = "agg"
    DISAGG = "disagg"

    @property
    def pool_roles(self) -> tuple[PoolRole, ...]:
        return (PoolRole.AGG,) if self is Mode.AGG else (PoolRole.PREFILL, PoolRole.DECODE)


class PoolRole(StrEnum):
    PREFILL = "prefill"
    DECODE = "decode"
    AGG = "agg"

    @property
    def disaggregation_mode(self) -> str:
        """The value of Dynamo's `--disaggregation-mode` for a worker of this role."""
        return self.value

    @property
    def publishes_kv_events(self) -> bool:
        # The KV router scores overlap against the workers that hold prompt KV: prefill in a
        # disaggregated graph, every worker in an aggregated one.
        return self in (PoolRole.PREFILL, PoolRole.AGG)

    @property
    def overlap_scheduler(self) -> bool:
        # TRT-LLM's overlap scheduler must be off for context-only (prefill) workers.
        return self is not PoolRole.PREFILL

    @property
    def dynamo_component(self) -> str:
        """The component a worker registers under (`dyn://NAMESPACE.COMPONENT.generate`), as
        Dynamo's own launchers name it: prefill workers "prefill", the others "backend"."""
        return "prefill" if self is PoolRole.PREFILL else "backend"

    @property
    def worker_type(self) -> str:
        """Dynamo's name for workers of this role: the frontend's `/v1/models/<model>/ready`
        counts and the mocker's `worker_type` engine argument both use it."""
        return {PoolRole.PREFILL: "prefill", PoolRole.DECODE: "decode",
                PoolRole.AGG: "aggregated"}[self]

    @property
    def router_worker_type(self) -> str:
        """The KV router's `worker_type` label: it counts aggregated workers as decode
        workers (they run the decode step)."""
        return "prefill" if self is PoolRole.PREFILL else "decode"

    @property
    def k8s_component_type(self) -> str:
        """The DynamoGraphDeployment component `type` the operator knows this role by."""
        return {PoolRole.PREFILL: "prefill", PoolRole.DECODE: "decode",
                PoolRole.AGG: "worker"}[self]

    def k8s_component_name(self, engine_prefix: str) -> str:
        """The DGD component name, as in Dynamo's examples (TRTLLMPrefillWorker ...), after
        the engine's prefix (engines/)."""
        suffix = {PoolRole.PREFILL: "PrefillWorker", PoolRole.DECODE: "DecodeWorker",
                  PoolRole.AGG: "Worker"}[self]
        return engine_prefix + suffix


class ProcessKind(StrEnum):
    """The kinds of process a graph runs."""

    ETCD = "etcd"
    NATS = "nats"
    FRONTEND = "frontend"
    WORKER = "worker"
    BALANCER = "balancer"
    """haproxy in front of several frontend replicas (render/balancer.py)."""
    VRRP = "vrrp"
    """keepalived, which moves the floating address between the balancers' nodes."""
    PLANNER = "planner"  # Dynamo's planner (`autoscale`), on the head node

    def restart_policy(self, supervision: Supervision) -> Restart:
        """This kind's restart policy in the topology's `supervision` section (the balancer
        and the floating address follow the frontend's)."""
        if self in (ProcessKind.BALANCER, ProcessKind.VRRP):
            return supervision.frontend
        return getattr(supervision, "workers" if self is ProcessKind.WORKER else self.value)

    @property
    def is_entry(self) -> bool:
        """What stands between clients and the frontends (balancer, floating address)."""
        return self in (ProcessKind.BALANCER, ProcessKind.VRRP)

    @property
    def gates_readiness(self) -> bool:
        """The graph is ready only once this process is: not the planner, which takes ~25 s
        to start (two 10 s waits for profiling data the workers do not serve) and routes no
        request; `status` shows it starting meanwhile, and a failed planner degrades."""
        return self is not ProcessKind.PLANNER

    @property
    def is_coordination(self) -> bool:
        """etcd or NATS: every Dynamo process connects to them as it starts, so they start
        first and are waited for, run on the head node, and stop last."""
        return self in (ProcessKind.ETCD, ProcessKind.NATS)

    @property
    def ready_on_accept(self) -> bool:
        """While starting, ready once its port accepts connections, whatever its health
        probe says: Dynamo connects to etcd and waits out the leader election itself, while
        etcd's /health blocks for up to a second of that election (holding back the probes of
        every other process). The health probe stays its liveness check once it runs."""
        return self is ProcessKind.ETCD

    @property
    def reports_readiness(self) -> bool:
        """Its /health body says `"status": "ready"` once its Dynamo endpoint is registered
        (DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS); a 200 alone is not ready."""
        return self in (ProcessKind.WORKER, ProcessKind.PLANNER)

    @property
    def serves_alone(self) -> bool:
        """The graph cannot serve without this very process (a worker has pool peers; the
        planner routes nothing)."""
        return self not in (ProcessKind.WORKER, ProcessKind.PLANNER)

    @property
    def stop_rank(self) -> int:
        """Kinds stop in rising rank: the planner (no more decisions), the floating address
        and the balancer, the frontend (no new requests), then the workers, then NATS, then
        etcd (which the others deregister from)."""
        return {ProcessKind.PLANNER: -1, ProcessKind.VRRP: 0, ProcessKind.BALANCER: 1,
                ProcessKind.FRONTEND: 2, ProcessKind.WORKER: 3, ProcessKind.NATS: 4,
                ProcessKind.ETCD: 5}[self]

    def port_key(self, port: str, worker_index: int = 0) -> str:
        """The topology key that sets this kind's port named `port` (worker: the
        `worker_index`-th worker's system port; a frontend replica's likewise), so a port
        conflict names what to change."""
        if self is ProcessKind.WORKER:
            return f"observability.system_port_base + {worker_index}"
        if (self, port) == (ProcessKind.FRONTEND, "replica"):
            return "frontend.replica_port" + (f" + {worker_index}" if worker_index else "")
        return {(ProcessKind.ETCD, "client"): "coordination.etcd.client_port",
                (ProcessKind.ETCD, "peer"): "coordination.etcd.peer_port",
                (ProcessKind.NATS, "client"): "coordination.nats.port",
                (ProcessKind.NATS, "cluster"): "coordination.nats.cluster_port",
                (ProcessKind.FRONTEND, "http"): "frontend.port",
                (ProcessKind.BALANCER, "http"): "frontend.port",
                (ProcessKind.PLANNER, "system"): "autoscale.system_port",
                (ProcessKind.PLANNER, "scaler"): "autoscale.system_port + 1"}[(self, port)]


class WeightDtype(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"
    INT8 = "int8"
    AWQ = "awq"

    @property
    def bytes_per_param(self) -> float:
        return {"bf16": 2.0, "fp8": 1.0, "int8": 1.0, "awq": 0.5}[self.value]

    @property
    def needs_quantized_checkpoint(self) -> bool:
        # TRT-LLM's PyTorch backend runs the format a checkpoint declares; it never
        # quantizes 16-bit weights at load time.
        return self is not WeightDtype.BF16


class KvCacheDtype(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"

    @property
    def bytes_per_element(self) -> float:
        return 2.0 if self is KvCacheDtype.BF16 else 1.0

    @property
    def engine_dtype(self) -> str:
        """TRT-LLM's kv_cache_config.dtype, which the mocker's --kv-cache-dtype spells the
        same way: "auto" follows the model dtype (bf16 here)."""
        return "auto" if self is KvCacheDtype.BF16 else "fp8"


class RouterMode(StrEnum):
    KV = "kv"
    ROUND_ROBIN = "round-robin"
    RANDOM = "random"

    @property
    def is_kv_aware(self) -> bool:
        return self is RouterMode.KV


class EtcdMode(StrEnum):
    EMBEDDED = "embedded"
    EXTERNAL = "external"


class NatsMode(StrEnum):
    EMBEDDED = "embedded"
    EXTERNAL = "external"
    OFF = "off"


class RequestPlane(StrEnum):
    TCP = "tcp"
    NATS = "nats"

    @property
    def needs_nats(self) -> bool:
        return self is RequestPlane.NATS


class EventPlane(StrEnum):
    ZMQ = "zmq"
    NATS = "nats"

    @property
    def needs_nats(self) -> bool:
        return self is EventPlane.NATS


class KvTransferBackend(StrEnum):
    DEFAULT = "DEFAULT"
    NIXL = "NIXL"
    UCX = "UCX"
    MPI = "MPI"

