"""The topology schema: the single truth about a dis-serve graph.

Everything else (validation messages, rendering, launching, benchmarking, planning) reads these
models. Validators here are pure: they look at the topology and the catalog, never at the
machine (ports in use, binaries, GPUs present are preflight's job).
"""

from __future__ import annotations

import ipaddress
import math
import re
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from .catalog import GPUS, GpuType, ModelArchitecture, find_known_model
from .sizing import GIB, MemoryFit, fit_worker_memory


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False, validate_default=True)


class Backend(StrEnum):
    TRTLLM = "trtllm"
    MOCKER = "mocker"

    @property
    def needs_gpu(self) -> bool:
        return self is Backend.TRTLLM

    @property
    def module(self) -> str:
        """The Python module a worker of this backend runs as."""
        return {Backend.TRTLLM: "dynamo.trtllm", Backend.MOCKER: "dynamo.mocker"}[self]

    @property
    def k8s_component_prefix(self) -> str:
        """How Dynamo's DGD examples begin the names of this backend's worker components."""
        return {Backend.TRTLLM: "TRTLLM", Backend.MOCKER: "Mocker"}[self]

    @property
    def uses_engine_config(self) -> bool:
        return self is Backend.TRTLLM

    @property
    def dgd_backend_framework(self) -> str | None:
        """The DGD's spec.backendFramework (the CRD knows sglang, vllm and trtllm; the
        mocker has none)."""
        return "trtllm" if self is Backend.TRTLLM else None


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

    def k8s_component_name(self, backend: Backend) -> str:
        """The DGD component name, as in Dynamo's examples (TRTLLMPrefillWorker ...)."""
        suffix = {PoolRole.PREFILL: "PrefillWorker", PoolRole.DECODE: "DecodeWorker",
                  PoolRole.AGG: "Worker"}[self]
        return backend.k8s_component_prefix + suffix


class ProcessKind(StrEnum):
    """The kinds of process a graph runs."""

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

    @property
    def stop_rank(self) -> int:
        """Kinds stop in rising rank: the frontend first (no new requests), then the
        workers, then NATS, then etcd (which the others deregister from)."""
        return {ProcessKind.FRONTEND: 0, ProcessKind.WORKER: 1, ProcessKind.NATS: 2,
                ProcessKind.ETCD: 3}[self]

    def port_key(self, port: str, worker_index: int = 0) -> str:
        """The topology key that sets this kind's port named `port` (worker: the
        `worker_index`-th worker's system port), so a port conflict names what to change."""
        if self is ProcessKind.WORKER:
            return f"observability.system_port_base + {worker_index}"
        return {(ProcessKind.ETCD, "client"): "coordination.etcd.client_port",
                (ProcessKind.ETCD, "peer"): "coordination.etcd.peer_port",
                (ProcessKind.NATS, "client"): "coordination.nats.port",
                (ProcessKind.FRONTEND, "http"): "frontend.port"}[(self, port)]


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

    @property
    def trtllm_quant_algo(self) -> str | None:
        """TRT-LLM's `quant_config.quant_algo` for this weight format (None: unquantized)."""
        return {"bf16": None, "fp8": "FP8", "int8": "W8A16", "awq": "W4A16_AWQ"}[self.value]


class KvCacheDtype(StrEnum):
    BF16 = "bf16"
    FP8 = "fp8"

    @property
    def bytes_per_element(self) -> float:
        return 2.0 if self is KvCacheDtype.BF16 else 1.0

    @property
    def trtllm_dtype(self) -> str:
        # TRT-LLM's kv_cache_config.dtype: "auto" follows the model dtype (bf16 here).
        return "auto" if self is KvCacheDtype.BF16 else "fp8"

    @property
    def mocker_dtype(self) -> str:
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


Port = Annotated[int, Field(ge=1, le=65535)]
MAX_SYSTEM_PORT = 32767
# Graph and scenario names become Kubernetes names, namespaces and directory names. Always
# matched whole (re.fullmatch): `$` would also match before a trailing newline.
NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,38}[a-z0-9]")
# The frontend names a file after the served model name, and one path component holds 255
# bytes (NAME_MAX): measured with Dynamo 1.6.1, a 255-byte name serves, a 256-byte one never
# gets past "Model materialization failed" (File name too long).
MAX_SERVED_NAME_BYTES = 255
# model.id is a Hugging Face id or a path; Linux refuses longer paths (PATH_MAX) and longer
# path components (NAME_MAX).
MAX_MODEL_ID_BYTES = 4095
MAX_PATH_COMPONENT_BYTES = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def is_valid_name(name: str) -> bool:
    """The rule for graph and scenario names, matched against the whole name."""
    return NAME_RE.fullmatch(name) is not None


ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Architecture(_Strict):
    """Architecture facts the memory and parallelism checks need (from the model's config.json)."""

    layers: int = Field(gt=0, description="Number of transformer layers (num_hidden_layers).")
    attention_heads: int = Field(gt=0, description="Query heads (num_attention_heads).")
    kv_heads: int = Field(gt=0, description="Key/value heads (num_key_value_heads; GQA).")
    hidden_size: int = Field(gt=0, description="Model width (hidden_size).")
    params_billion: float = Field(gt=0, description="Parameter count in billions.")
    vocab_size: int = Field(default=128256, gt=0, description="Vocabulary size.")
    max_position_embeddings: int = Field(
        default=131072, gt=0, description="Longest context the model supports.")
    head_dim: int | None = Field(
        default=None, gt=0,
        description="config.json's head_dim where it is not hidden_size / attention_heads.")

    def to_catalog(self) -> ModelArchitecture:
        fields = self.model_dump()
        return ModelArchitecture(explicit_head_dim=fields.pop("head_dim"), **fields)


class Model(_Strict):
    """The model being served."""

    id: str = Field(
        min_length=1,
        description="Hugging Face id or local path passed to the workers. For the mocker, a "
                    "local model card directory, or any id: dis-serve then makes a "
                    "tokenizer-only card locally and never reaches a hub.")
    served_name: str | None = Field(
        default=None, description="Name clients use in the OpenAI API (default: the id).")
    architecture: Architecture | None = Field(
        default=None,
        description="Architecture facts; optional for catalog models (Llama-3.1-70B/8B, "
                    "Qwen3-32B), required otherwise.")
    dtype: WeightDtype = Field(
        default=WeightDtype.BF16, description="Weight format: bf16 | fp8 | int8 | awq.")
    kv_cache_dtype: KvCacheDtype = Field(
        default=KvCacheDtype.BF16, description="KV-cache element format: bf16 | fp8.")
    prequantized: bool = Field(
        default=False,
        description="model.id is a checkpoint already quantized to model.dtype (e.g. your own "
                    "Model Optimizer export). Needed for fp8/int8/awq unless model.id is a "
                    "catalog checkpoint of that format; TRT-LLM never quantizes at load time.")
    max_input_tokens: int = Field(
        default=4096, gt=0, description="Longest prompt the graph must accept, in tokens.")
    max_output_tokens: int = Field(
        default=1024, gt=0, description="Longest completion the graph must produce, in tokens.")
    revision: Revision = Field(
        default="main",
        description="Hugging Face revision of model.id that gets downloaded (the Kubernetes "
                    "download Job). A commit hash pins the weights; `main` is whatever the "
                    "repository holds when the download runs (validate warns).")
    path: str | None = Field(
        default=None, min_length=1,
        description="Checkpoint directory on storage every node shares (hosts and Slurm): "
                    "the workers load it as --model, inside a container it is mounted at "
                    "the same path, and each node checks config.json and the weights are "
                    "there before its workers start. Default: model.id through the Hugging "
                    "Face cache.")

    @model_validator(mode="after")
    def _check_names(self) -> Model:
        for key, value in (("model.id", self.id), ("model.served_name", self.served_name)):
            if value is not None and (match := _CONTROL.search(value)):
                raise ValueError(f"{key} {value[:60]!r} holds the control character "
                                 f"{match.group()!r}; remove it (names reach files, argv and "
                                 "logs)")
        too_long = next((part for part in self.id.split("/")
                         if len(part.encode()) > MAX_PATH_COMPONENT_BYTES), None)
        if len(self.id.encode()) > MAX_MODEL_ID_BYTES or too_long is not None:
            raise ValueError(f"model.id is {len(self.id.encode())} bytes; the filesystem takes "
                             f"at most {MAX_MODEL_ID_BYTES} bytes in a path and "
                             f"{MAX_PATH_COMPONENT_BYTES} between slashes; shorten it")
        if len(self.name.encode()) > MAX_SERVED_NAME_BYTES:
            key = "model.served_name" if self.served_name else "model.id"
            raise ValueError(f"{key} gives a served model name of {len(self.name.encode())} "
                             f"bytes; Dynamo names files after it, which allows at most "
                             f"{MAX_SERVED_NAME_BYTES}; set a shorter model.served_name")
        return self

    @property
    def name(self) -> str:
        return self.served_name or self.id

    @property
    def max_seq_len(self) -> int:
        return self.max_input_tokens + self.max_output_tokens

    def resolved_architecture(self) -> ModelArchitecture:
        if self.architecture is not None:
            return self.architecture.to_catalog()
        known = find_known_model(self.id)
        if known is None:  # guarded by Topology's validator; kept for direct callers
            raise ValueError(f"model.architecture is required for {self.id!r}")
        return known.architecture


class Hardware(_Strict):
    """The GPUs the graph runs on."""

    gpu: GpuType = Field(
        default=GpuType.H100_SXM,
        description="GPU type from the catalog: " + ", ".join(g.value for g in GpuType) + ".")
    gpus_per_node: int = Field(default=8, ge=1, le=16, description="GPUs in each node.")
    nodes: int = Field(default=1, ge=1, le=1024, description="Number of nodes.")
    price_per_gpu_hour: float | None = Field(
        default=None, gt=0, description="USD per GPU-hour (default: the catalog's list price).")

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def hourly_price(self) -> float:
        return self.price_per_gpu_hour or GPUS[self.gpu].price_per_hour_usd


class Pool(_Strict):
    """A pool of identical workers: prefill, decode, or aggregated."""

    workers: int = Field(default=1, ge=1, le=4096, description="Number of worker replicas.")
    tensor_parallel: int = Field(default=1, ge=1, le=64, description="GPUs per worker (TP).")
    max_batch_size: int = Field(
        default=64, ge=1, le=16384, description="Most requests a worker runs at once.")
    max_num_tokens: int = Field(
        default=8192, ge=16, le=1048576,
        description="Most tokens a worker schedules in one forward pass.")
    free_gpu_memory_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="Share of free GPU memory TRT-LLM gives the KV cache (default: the "
                    "role's template in configs/trtllm/, from NVIDIA's disagg recipe: prefill "
                    "0.75, decode and agg 0.85).")
    gpu_ids: list[list[int]] | None = Field(
        default=None,
        description="Explicit GPUs, one list of tensor_parallel ids per worker; ids count "
                    "across nodes (node n holds n*gpus_per_node ...). Default: packed in order.")

    @property
    def gpus(self) -> int:
        return self.workers * self.tensor_parallel


class Pools(_Strict):
    """Worker pools: `prefill` and `decode` for disagg, `agg` for agg."""

    prefill: Pool | None = Field(default=None, description="Prefill (context) workers.")
    decode: Pool | None = Field(default=None, description="Decode (generation) workers.")
    agg: Pool | None = Field(default=None, description="Aggregated workers (prefill+decode).")

    def get(self, role: PoolRole | str) -> Pool | None:
        return getattr(self, PoolRole(role).value)


class Router(_Strict):
    """The frontend's router."""

    mode: RouterMode = Field(default=RouterMode.KV, description="kv | round-robin | random.")
    kv_events: bool = Field(
        default=True,
        description="KV router: follow the workers' KV events (else predict cache contents).")
    policy_config: str | None = Field(
        default=None,
        description="KV router: Dynamo router-policy YAML (--router-policy-config). Since "
                    "Dynamo 1.6 the cost weights (prefill_load_scale, router_temperature, "
                    "overlap_score_credit) live there; the old per-weight flags are "
                    "deprecated and dis-serve does not emit them.")


class Frontend(_Strict):
    """The OpenAI-compatible HTTP frontend."""

    host: str = Field(
        default="127.0.0.1",
        description="Address the HTTP server binds: an IP address of this machine "
                    "(127.0.0.1, 0.0.0.0, ::1 ...) or localhost.")
    port: Port = Field(default=8000, description="HTTP port.")
    migration_limit: int = Field(
        default=3, ge=0, le=100,
        description="Times a request may move to another worker when its worker dies.")
    planned_rate_per_s: float | None = Field(
        default=None, gt=0, le=100_000,
        description="Requests per second the graph is planned for (`dis-serve plan` writes "
                    "its planned rate). Sizes the Kubernetes frontend's CPU from the measured "
                    "CPU per request; unset: 4 CPUs.")

    @model_validator(mode="after")
    def _host_is_an_address(self) -> Frontend:
        if self.host == "localhost":
            return self
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            raise ValueError(f"frontend.host {self.host[:60]!r} is not an IP address; the "
                             "server binds an address, not a name: use 127.0.0.1 (this machine "
                             "only), 0.0.0.0 (every interface) or one of this machine's "
                             "addresses") from None
        return self


class Etcd(_Strict):
    mode: EtcdMode = Field(default=EtcdMode.EMBEDDED, description="embedded | external.")
    url: str | None = Field(default=None, description="Client URL when external.")
    client_port: Port = Field(default=2379, description="Client port when embedded.")
    peer_port: Port = Field(default=2380, description="Peer port when embedded.")

    @model_validator(mode="after")
    def _url_matches_mode(self) -> Etcd:
        if self.mode is EtcdMode.EXTERNAL and not self.url:
            raise ValueError("etcd.mode is external but etcd.url is missing; set "
                             "url: http://HOST:2379 or use mode: embedded")
        return self

    @property
    def client_url(self) -> str:
        return self.url if self.url else f"http://127.0.0.1:{self.client_port}"


class NatsAuth(_Strict):
    """NATS token authentication for the multi-node targets (hosts, Slurm), where NATS listens
    on the head's cluster address; a local graph keeps NATS on loopback without it. The token
    is read where the processes start (from the file or the environment variable) and never
    written into rendered files or logs."""

    token_file: str | None = Field(
        default=None, description="File that holds the token (on every node).")
    token_env: str | None = Field(
        default=None, description="Environment variable that holds the token where the "
                                  "scripts run (for Slurm: where sbatch is called).")

    @model_validator(mode="after")
    def _one_source(self) -> NatsAuth:
        if (self.token_file is None) == (self.token_env is None):
            raise ValueError("coordination.nats.auth needs exactly one of token_file or "
                             "token_env")
        if self.token_env is not None and not ENV_NAME_RE.fullmatch(self.token_env):
            raise ValueError(f"coordination.nats.auth.token_env {self.token_env!r} is not an "
                             "environment variable name; use letters, digits and _")
        return self


class Nats(_Strict):
    mode: NatsMode = Field(default=NatsMode.EMBEDDED, description="embedded | external | off.")
    url: str | None = Field(default=None, description="Server URL when external.")
    port: Port = Field(default=4222, description="Client port when embedded.")
    auth: NatsAuth | None = Field(
        default=None, description="Token authentication (clients and the embedded server).")

    @model_validator(mode="after")
    def _url_matches_mode(self) -> Nats:
        if self.mode is NatsMode.EXTERNAL and not self.url:
            raise ValueError("nats.mode is external but nats.url is missing; set "
                             "url: nats://HOST:4222 or use mode: embedded")
        return self

    @property
    def client_url(self) -> str | None:
        if self.mode is NatsMode.OFF:
            return None
        return self.url if self.url else f"nats://127.0.0.1:{self.port}"


class Coordination(_Strict):
    """Discovery (etcd), messaging (NATS) and Dynamo's request and event planes."""

    etcd: Etcd = Field(default_factory=Etcd, description="Service discovery store.")
    nats: Nats = Field(default_factory=Nats, description="Message bus (JetStream).")
    request_plane: RequestPlane = Field(
        default=RequestPlane.TCP, description="How requests reach workers: tcp | nats.")
    # NATS by default: Dynamo 1.6.1's ZMQ event publishers bind 0.0.0.0 whatever
    # DYN_EVENT_PLANE_HOST says, and a local graph must stay on loopback.
    event_plane: EventPlane = Field(
        default=EventPlane.NATS,
        description="How KV events reach the router: nats | zmq (zmq listens on all "
                    "interfaces in Dynamo 1.6.1).")

    @property
    def uses_external_planes(self) -> bool:
        return (self.etcd.mode is EtcdMode.EXTERNAL) or (self.nats.mode is NatsMode.EXTERNAL)

    @model_validator(mode="after")
    def _planes_have_nats(self) -> Coordination:
        if self.nats.mode is NatsMode.OFF:
            for plane in (self.request_plane, self.event_plane):
                if plane.needs_nats:
                    raise ValueError(
                        f"{type(plane).__name__.replace('Plane', '').lower()}_plane is nats "
                        "but nats.mode is off; use tcp/zmq or turn NATS on")
        return self


class KvTransfer(_Strict):
    """How prefill workers ship KV cache to decode workers (TRT-LLM cache transceiver)."""

    backend: KvTransferBackend = Field(
        default=KvTransferBackend.DEFAULT, description="DEFAULT | NIXL | UCX | MPI.")
    max_tokens_in_buffer: int | None = Field(
        default=None, gt=0,
        description="Transfer buffer in tokens; must hold the longest input "
                    "(default: model.max_input_tokens rounded up to a power of two).")


class Mocker(_Strict):
    """Settings only the mocker backend reads."""

    speedup_ratio: float = Field(
        default=1.0, gt=0, description="Run the mocker's simulated clock this much faster.")
    profile_data: str | None = Field(
        default=None,
        description="Performance data (.npz or profiler results folder) the mocker times "
                    "itself with; `dis-serve plan --mock` writes one for the planned hardware.")
    num_gpu_blocks: int | None = Field(
        default=None, gt=0, description="KV blocks per worker (default: the mocker's own).")
    kv_transfer_bandwidth_gbps: float | None = Field(
        default=None, ge=0,
        description="Simulated prefill->decode KV transfer bandwidth in GB/s (0: no delay; "
                    "default: the mocker's own).")
    prefix_caching: bool = Field(
        default=True,
        description="Reuse KV blocks of repeated prompt prefixes (mocker "
                    "--enable-prefix-caching). Turn it off to time every prompt's prefill in "
                    "full: a tokenizer-only card maps most benchmark text to a few tokens, so "
                    "synthetic prompts repeat by accident.")


class KvCache(_Strict):
    """How workers page the KV cache (the router hashes blocks of the same size)."""

    block_size: int = Field(
        default=32, ge=1, le=1024,
        description="Tokens per KV block (TRT-LLM tokens_per_block, mocker --block-size).")


class Observability(_Strict):
    system_port_base: Port = Field(
        default=9100,
        description="First worker system port (/health, /live, /metrics); worker i gets base+i.")
    engine_metrics: bool = Field(
        default=False,
        description="TRT-LLM iteration metrics on each worker's /metrics (--publish-metrics). "
                    "Off by default: Dynamo 1.6.1 notes a per-iteration throughput cost. "
                    "Always on when `autoscale` is set (the planner reads them).")


# --- Kubernetes -----------------------------------------------------------------------------
# A Kubernetes quantity as manifests write it (16Gi, 500m, 90Gi), and a DNS-1123 label.
QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?")
K8S_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _full_match(pattern: re.Pattern[str], example: str) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):
            raise ValueError(f"{value!r} is not valid here; write it like {example}")
        return value
    return AfterValidator(check)


def _schema_pattern(pattern: re.Pattern[str]) -> Any:
    # For `dis-serve schema` readers; validation itself is the full match above.
    return Field(json_schema_extra={"pattern": f"^(?:{pattern.pattern})$"})


Quantity = Annotated[str, _full_match(QUANTITY_RE, "16Gi, 8 or 500m"),
                     _schema_pattern(QUANTITY_RE)]
K8sName = Annotated[str, _full_match(K8S_NAME_RE, "model-cache (lower-case, digits, dashes)"),
                    _schema_pattern(K8S_NAME_RE)]
REVISION_RE = re.compile(r"[A-Za-z0-9._/-]+")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
Revision = Annotated[str, _full_match(REVISION_RE, "main or a commit hash"),
                     _schema_pattern(REVISION_RE)]
Digest = Annotated[str, _full_match(DIGEST_RE, "sha256: and 64 hex digits"),
                   _schema_pattern(DIGEST_RE)]


class RdmaProfile(StrEnum):
    NONE = "none"
    INFINIBAND = "infiniband"
    ROCE = "roce"

    @property
    def enabled(self) -> bool:
        return self is not RdmaProfile.NONE

    @property
    def default_resource(self) -> str | None:
        # NVIDIA's InfiniBand fabric profiles (recipes/addons/providers/nebius-ib.yaml,
        # aks-ib.yaml) request the RDMA device plugin's `rdma/ib`; RoCE resource names are
        # the cluster's own (GKE: networking.gke.io.networks/rdma-0 ...).
        return "rdma/ib" if self is RdmaProfile.INFINIBAND else None


class Rdma(_Strict):
    """How KV-cache transfers reach the RDMA fabric from a worker pod."""

    profile: RdmaProfile = Field(
        default=RdmaProfile.NONE,
        description="none | infiniband | roce. Without it UCX falls back to TCP between "
                    "prefill and decode pods on different nodes.")
    resource_name: str | None = Field(
        default=None, min_length=1,
        description="Extended resource the RDMA device plugin offers (default for "
                    "infiniband: rdma/ib; required for roce).")
    resource_count: int = Field(
        default=1, ge=1, le=64,
        description="How many of it each worker requests. NVIDIA's IB profiles keep 1: it "
                    "is a device-plugin slot that grants all HCAs, not a per-GPU count.")
    ucx_net_devices: str | None = Field(
        default=None, min_length=1,
        description="UCX_NET_DEVICES (e.g. mlx5_0:1,mlx5_1:1) where nodes also carry "
                    "non-fabric NICs UCX could pick (NVIDIA's aks-ib profile needs it).")
    privileged: bool = Field(
        default=False,
        description="Run workers privileged, as NVIDIA's provider profiles do; only for "
                    "device plugins that need it. Default: IPC_LOCK only (pinning "
                    "registered memory), no privilege.")

    @model_validator(mode="after")
    def _resource_known(self) -> Rdma:
        if self.profile is RdmaProfile.ROCE and self.resource_name is None:
            raise ValueError("rdma.profile is roce but rdma.resource_name is missing; set it "
                             "to your RDMA device plugin's resource (kubectl describe node)")
        return self

    @property
    def resource(self) -> str | None:
        if not self.profile.enabled:
            return None
        return self.resource_name or self.profile.default_resource


class ModelCache(_Strict):
    """Where worker pods find the weights: one PersistentVolumeClaim, filled once."""

    pvc: K8sName | None = Field(
        default=None, description="PersistentVolumeClaim name (default: NAME-model-cache).")
    existing: bool = Field(
        default=False,
        description="The claim exists and holds the model already, in Hugging Face's cache "
                    "layout under huggingface/ (HF_HOME) or at the /model-cache/... path "
                    "model.id names: render neither the claim nor the download Job.")
    size: Quantity | None = Field(
        default=None,
        description="Claim size (default: the checkpoint's size plus a quarter, in 10Gi "
                    "steps).")
    storage_class: str | None = Field(
        default=None, min_length=1,
        description="StorageClass of the claim; it must offer ReadWriteMany (worker pods on "
                    "several nodes mount it). Default: the cluster's default class.")
    hf_token_secret: K8sName = Field(
        default="hf-token-secret",
        description="Secret with HF_TOKEN, read by the download Job only.")

    @model_validator(mode="before")
    @classmethod
    def _revision_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and "revision" in data:
            raise ValueError("kubernetes.model_cache.revision moved to model.revision (every "
                             "target reads it); write it there")
        return data


class ServiceExposure(StrEnum):
    CLUSTER_IP = "cluster-ip"
    NODE_PORT = "node-port"
    LOAD_BALANCER = "load-balancer"

    @property
    def service_type(self) -> str | None:
        """The extra Service to render (None: the operator's ClusterIP Service is enough)."""
        return {ServiceExposure.CLUSTER_IP: None, ServiceExposure.NODE_PORT: "NodePort",
                ServiceExposure.LOAD_BALANCER: "LoadBalancer"}[self]


class Toleration(_Strict):
    key: str = Field(min_length=1, description="Taint key, e.g. nvidia.com/gpu.")
    operator: Literal["Exists", "Equal"] = Field(
        default="Exists", description="Exists | Equal.")
    value: str | None = Field(default=None, description="Taint value (operator Equal).")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="NoSchedule | PreferNoSchedule | NoExecute (default: all).")


class PodSecurity(_Strict):
    """Pod-level identity. NVIDIA's Dynamo runtime images run as user `dynamo` (uid 1000,
    group 0); their model-download recipe uses the same ids."""

    run_as_user: int = Field(default=1000, ge=1, description="Non-root uid of every pod.")
    run_as_group: int = Field(default=0, ge=0, description="Primary gid.")
    fs_group: int = Field(default=0, ge=0, description="Group that owns mounted volumes.")


class ComputeResources(_Strict):
    """CPU and memory for one pod (requests = limits: the Guaranteed QoS class)."""

    cpu: Quantity | None = Field(default=None, description="CPU, e.g. 8 or 500m.")
    memory: Quantity | None = Field(default=None, description="Memory, e.g. 64Gi.")


class Kubernetes(_Strict):
    """How `render --target k8s` deploys the graph through Dynamo's operator."""

    namespace: K8sName = Field(
        default="default",
        description="Kubernetes namespace. The operator names the Dynamo namespace "
                    "NAMESPACE-NAME from it and the graph name.")
    image: str | None = Field(
        default=None, min_length=1,
        description="Runtime image (default: NVIDIA's Dynamo 1.6.1 image for the backend).")
    image_digest: Digest | None = Field(
        default=None,
        description="sha256:... to pin the image by content.")
    model_cache: ModelCache = Field(default_factory=ModelCache, description="Weights cache.")
    rdma: Rdma = Field(default_factory=Rdma, description="RDMA for KV-cache transfer.")
    node_selector: dict[str, str] = Field(
        default_factory=dict, description="Node labels worker pods must match.")
    tolerations: list[Toleration] = Field(
        default_factory=list, description="Taints worker pods tolerate (GPU node taints).")
    shared_memory: Quantity = Field(
        default="16Gi",
        description="/dev/shm size per pod (the operator's sharedMemorySize; it mounts "
                    "/dev/shm itself, 8Gi by default). NCCL between TP ranks uses it.")
    service: ServiceExposure = Field(
        default=ServiceExposure.CLUSTER_IP,
        description="cluster-ip | node-port | load-balancer. Nothing is public unless asked.")
    security: PodSecurity = Field(default_factory=PodSecurity, description="Pod identity.")
    frontend_resources: ComputeResources = Field(
        default_factory=ComputeResources,
        description="Frontend CPU/memory (default: CPU from frontend.planned_rate_per_s, "
                    "else 4 CPUs; 8Gi).")
    worker_resources: ComputeResources = Field(
        default_factory=ComputeResources,
        description="Worker CPU/memory (default: 8 CPUs and 32Gi per GPU, at least twice "
                    "the worker's weight shard plus /dev/shm).")
    metrics_namespaces: list[K8sName] = Field(
        default_factory=list,
        description="Namespaces (e.g. monitoring) allowed to scrape worker metrics past the "
                    "NetworkPolicy.")


class PoolScaling(_Strict):
    min_replicas: int = Field(default=1, ge=1, description="Fewest workers the planner keeps.")


class Autoscale(_Strict):
    """Dynamo's SLA planner on Kubernetes: it resizes the pools to hold TTFT and ITL."""

    ttft_ms: float = Field(gt=0, description="Target time to first token, ms.")
    itl_ms: float = Field(gt=0, description="Target inter-token latency, ms.")
    max_gpus: int | None = Field(
        default=None, ge=1,
        description="GPU budget the planner may use (default: hardware's GPUs). Dynamo 1.6.1's "
                    "planner bounds the total, not each pool.")
    prefill: PoolScaling = Field(default_factory=PoolScaling, description="Prefill floor.")
    decode: PoolScaling = Field(default_factory=PoolScaling, description="Decode floor.")
    agg: PoolScaling = Field(default_factory=PoolScaling, description="Aggregated floor.")
    throughput_interval_s: int = Field(
        default=60, ge=1,
        description="Seconds between SLA (throughput) decisions; NVIDIA's disagg_planner "
                    "example uses 60.")
    load_interval_s: int = Field(
        default=5, ge=1,
        description="Seconds between load decisions; must divide throughput_interval_s.")

    @model_validator(mode="after")
    def _intervals_nest(self) -> Autoscale:
        if self.throughput_interval_s % self.load_interval_s or \
                self.load_interval_s >= self.throughput_interval_s:
            raise ValueError(
                f"autoscale.load_interval_s {self.load_interval_s} must be shorter than and "
                f"divide autoscale.throughput_interval_s {self.throughput_interval_s}; "
                "e.g. 5 and 60")
        return self

    def floor(self, role: PoolRole) -> int:
        return getattr(self, role.value).min_replicas


class Restart(_Strict):
    """How the supervisor treats one kind of process that exits (any exit: they are meant
    to run until stopped, so even status 0 counts), like systemd's Restart=always with a
    StartLimitBurst, or a Kubernetes pod's CrashLoopBackOff."""

    enabled: bool = Field(
        default=True, description="Restart it (false: its first exit fails the graph).")
    max_failures: int = Field(
        default=5, ge=1, le=1000,
        description="Exits within window_s after which this process is given up (the rest "
                    "of the graph keeps serving if it can, reported as degraded).")
    window_s: float = Field(default=300.0, gt=0, le=86400,
                            description="The window max_failures counts exits in.")
    backoff_base_s: float = Field(
        default=1.0, gt=0, le=600,
        description="Wait before the first restart; doubled for each further exit in a row.")
    backoff_cap_s: float = Field(default=30.0, gt=0, le=3600,
                                 description="Longest wait before a restart.")

    def delay(self, consecutive_failures: int) -> float:
        exponent = max(0, consecutive_failures - 1)
        return min(self.backoff_cap_s, self.backoff_base_s * (2 ** min(exponent, 30)))


class Liveness(_Strict):
    """When a worker that runs but does not answer its health probe is restarted."""

    failures: int = Field(
        default=3, ge=1, le=100,
        description="Failed health probes in a row (after the worker was ready once) that "
                    "get it restarted.")
    period_s: float = Field(default=1.0, gt=0, le=60, description="Seconds between probes.")
    timeout_s: float = Field(default=1.0, gt=0, le=60,
                             description="A probe not answered within this fails.")


def _fast_infra_restart() -> Restart:
    # etcd, NATS and the frontend start in well under a second: retry them quickly.
    return Restart(backoff_base_s=0.2, backoff_cap_s=5.0)


class Supervision(_Strict):
    """Restart policy per process kind, and the workers' liveness check (`dis-serve up`)."""

    etcd: Restart = Field(default_factory=_fast_infra_restart,
                          description="etcd (its data directory is kept across restarts).")
    nats: Restart = Field(default_factory=_fast_infra_restart,
                          description="NATS (its JetStream directory is kept).")
    frontend: Restart = Field(default_factory=_fast_infra_restart,
                              description="The frontend with its router.")
    workers: Restart = Field(default_factory=Restart, description="Every worker.")
    liveness: Liveness = Field(default_factory=Liveness, description="Worker liveness.")
class PlacementKind(StrEnum):
    LOCAL = "local"
    HOSTS = "hosts"
    SLURM = "slurm"

    @property
    def multi_node(self) -> bool:
        """Processes on several machines: they listen on cluster-facing addresses and find
        etcd and NATS on the head node."""
        return self is not PlacementKind.LOCAL


class KvInterconnect(StrEnum):
    TCP = "tcp"
    RDMA = "rdma"


HOST_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# An IPv4/IPv6 address or a DNS name: it lands in command lines and comments of scripts.
ADDRESS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}")
# Partition, account and job names go on #SBATCH lines, which the shell does not quote.
SLURM_WORD_RE = re.compile(r"[A-Za-z0-9_.,@+-]{1,128}")
# Slurm's --time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
SLURM_TIME_RE = re.compile(r"\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}){0,2}")


class HostNode(_Strict):
    """One machine of a `hosts` placement."""

    name: str = Field(description="Node name: its script is node-<name>.sh. Letters, digits, "
                                  "dots, dashes, underscores.")
    address: str = Field(
        min_length=1,
        description="Cluster-facing address (IP or DNS name) this node's processes listen on "
                    "and advertise to the others. Never 0.0.0.0 unless you mean every "
                    "interface.")
    gpus: int | None = Field(
        default=None, ge=0, le=16,
        description="GPUs on this node that dis-serve may use (default: "
                    "hardware.gpus_per_node; 0 for a head node without GPUs).")


class HostsPlacement(_Strict):
    """Machines you start by hand (or with your own tooling), one script per node."""

    nodes: list[HostNode] = Field(min_length=1, description="The machines, in node order.")
    head: str | None = Field(
        default=None,
        description="Node that runs etcd, NATS and the frontend (default: the first).")

    @property
    def head_index(self) -> int:
        names = [n.name for n in self.nodes]
        return names.index(self.head) if self.head in names else 0


class SlurmPlacement(_Strict):
    """One Slurm job (sbatch) for the whole graph; each process is an srun step on its node."""

    partition: str | None = Field(default=None, description="sbatch --partition.")
    account: str | None = Field(default=None, description="sbatch --account.")
    time_limit: str = Field(
        default="04:00:00", description="sbatch --time (HH:MM:SS, D-HH:MM:SS, minutes...).")
    nodes: int | None = Field(
        default=None, ge=1, le=1024,
        description="Nodes to allocate (default: hardware.nodes; must agree with it).")
    gpus_per_node: int | None = Field(
        default=None, ge=0, le=16,
        description="GPUs to request per node (default: hardware.gpus_per_node for GPU "
                    "backends, 0 for the mocker).")
    container_image: str | None = Field(
        default=None, min_length=1,
        description="Container image for every step (pyxis/enroot: srun --container-image), "
                    "e.g. nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1 or the .sqsh "
                    "`enroot import` made of it. Required for TensorRT-LLM graphs; `none` "
                    "runs every step on the nodes' own software (bare metal).")
    container_mounts: list[str] = Field(
        default_factory=list,
        description="More srun --container-mounts entries (SRC:DST); the run directory and "
                    "model.path are mounted at their own paths already.")
    cpus_per_gpu: int = Field(
        default=8, ge=1, le=256,
        description="CPUs per TensorRT-LLM rank (srun --cpus-per-task; one rank per GPU).")
    ucx_net_devices: str | None = Field(
        default=None, min_length=1,
        description="UCX_NET_DEVICES for the KV transfer (e.g. mlx5_0:1,mlx5_1:1). Default: "
                    "unset, UCX uses every device it finds.")
    interface: str | None = Field(
        default=None,
        description="Network interface whose IPv4 address each node listens on and "
                    "advertises, resolved on the node when the job runs (e.g. ib0). Default: "
                    "the address the node's hostname resolves to.")
    sbatch_extra: list[str] = Field(
        default_factory=list,
        description="Extra #SBATCH lines, without the prefix (e.g. --exclusive, "
                    "--qos=high).")
    job_name: str | None = Field(default=None, description="sbatch --job-name (default: "
                                                           "dis-serve-<name>).")


class Placement(_Strict):
    """Where the processes run: this machine (default), listed hosts, or a Slurm job."""

    hosts: HostsPlacement | None = Field(
        default=None, description="Machines you name, one script per node.")
    slurm: SlurmPlacement | None = Field(
        default=None, description="One sbatch job for the whole graph.")
    interconnect: KvInterconnect = Field(
        default=KvInterconnect.TCP,
        description="How KV cache moves between nodes: tcp | rdma (InfiniBand/RoCE, which "
                    "UCX/NIXL use when the nodes have it).")

    @model_validator(mode="after")
    def _one_kind(self) -> Placement:
        if self.hosts is not None and self.slurm is not None:
            raise ValueError("placement has both hosts and slurm; keep one of them")
        return self

    @property
    def kind(self) -> PlacementKind:
        if self.hosts is not None:
            return PlacementKind.HOSTS
        if self.slurm is not None:
            return PlacementKind.SLURM
        return PlacementKind.LOCAL


class Topology(_Strict):
    """One disaggregated (or aggregated) Dynamo serving graph."""

    name: str = Field(
        default="demo",
        description="Graph name: Dynamo namespace, run directory and Kubernetes name. "
                    "Lower-case letters, digits and dashes.")
    model: Model = Field(description="The model being served.")
    hardware: Hardware = Field(default_factory=Hardware, description="The GPUs.")
    backend: Backend = Field(default=Backend.TRTLLM, description="trtllm | mocker.")
    mode: Mode = Field(default=Mode.DISAGG, description="agg | disagg.")
    pools: Pools = Field(description="Worker pools.")
    router: Router = Field(default_factory=Router, description="Frontend router.")
    frontend: Frontend = Field(default_factory=Frontend, description="HTTP frontend.")
    coordination: Coordination = Field(
        default_factory=Coordination, description="etcd, NATS and Dynamo's planes.")
    kv_cache: KvCache = Field(default_factory=KvCache, description="KV-cache paging.")
    kv_transfer: KvTransfer = Field(
        default_factory=KvTransfer, description="KV-cache transfer between pools.")
    mocker: Mocker = Field(default_factory=Mocker, description="Mocker-only settings.")
    observability: Observability = Field(
        default_factory=Observability, description="Health and metrics ports.")
    supervision: Supervision = Field(
        default_factory=Supervision,
        description="Restart policy per process kind and worker liveness.")
    placement: Placement = Field(
        default_factory=Placement,
        description="Where processes run: local (default), hosts or slurm.")
    kubernetes: Kubernetes = Field(
        default_factory=Kubernetes, description="Kubernetes deployment (render --target k8s).")
    autoscale: Autoscale | None = Field(
        default=None,
        description="Dynamo's SLA planner on Kubernetes (a `planner` component); off unless "
                    "set.")

    # --- derived views -------------------------------------------------------------------
    @property
    def namespace(self) -> str:
        return "dis-serve-" + self.name

    def active_pools(self) -> list[tuple[PoolRole, Pool]]:
        return [(role, pool) for role in self.mode.pool_roles
                if (pool := self.pools.get(role)) is not None]

    @property
    def total_gpus(self) -> int:
        return sum(pool.gpus for _, pool in self.active_pools())

    @property
    def kv_buffer_tokens(self) -> int:
        if self.kv_transfer.max_tokens_in_buffer is not None:
            return self.kv_transfer.max_tokens_in_buffer
        return 1 << max(0, math.ceil(math.log2(self.model.max_input_tokens)))

    @property
    def publishes_engine_metrics(self) -> bool:
        return self.observability.engine_metrics or self.autoscale is not None

    def memory_fit(self, role: PoolRole) -> MemoryFit:
        pool = self.pools.get(role)
        assert pool is not None
        seq = self.model.max_input_tokens if role is PoolRole.PREFILL else self.model.max_seq_len
        return fit_worker_memory(
            arch=self.model.resolved_architecture(), gpu=GPUS[self.hardware.gpu],
            weight_bytes_per_param=self.model.dtype.bytes_per_param,
            kv_bytes_per_element=self.model.kv_cache_dtype.bytes_per_element,
            tensor_parallel=pool.tensor_parallel, batch=pool.max_batch_size, seq_len=seq)

    def node_gpus(self) -> list[int]:
        """GPUs dis-serve may use on each node, in node order."""
        hw = self.hardware
        hosts = self.placement.hosts
        if hosts is not None:
            return [hw.gpus_per_node if n.gpus is None else n.gpus for n in hosts.nodes]
        nodes = hw.nodes
        if self.placement.slurm is not None and self.placement.slurm.nodes is not None:
            nodes = self.placement.slurm.nodes
        return [hw.gpus_per_node] * nodes

    def usable_gpu_ids(self) -> set[int]:
        """Global GPU ids that exist: node n holds n*gpus_per_node up to its GPU count."""
        per_node = self.hardware.gpus_per_node
        return {n * per_node + i for n, count in enumerate(self.node_gpus())
                for i in range(count)}

    def gpu_assignment(self) -> dict[PoolRole, list[list[int]]]:
        """Global GPU ids per worker of each pool: explicit ids, else packed in pool order
        onto the nodes' GPUs without letting a worker straddle two nodes. Workers that do not
        fit get ids past the last node (the budget check reports them)."""
        per_node = self.hardware.gpus_per_node
        counts = self.node_gpus()
        taken = {g for _, p in self.active_pools() if p.gpu_ids for ids in p.gpu_ids for g in ids}
        cursor = 0
        out: dict[PoolRole, list[list[int]]] = {}
        for role, pool in self.active_pools():
            if pool.gpu_ids is not None:
                out[role] = [list(ids) for ids in pool.gpu_ids]
                continue
            workers = []
            for _ in range(pool.workers):
                while True:
                    node = cursor // per_node
                    count = counts[node] if node < len(counts) else per_node
                    if cursor + pool.tensor_parallel > node * per_node + count:
                        cursor = (node + 1) * per_node
                        continue
                    ids = list(range(cursor, cursor + pool.tensor_parallel))
                    if taken.isdisjoint(ids):
                        break
                    cursor += 1
                workers.append(ids)
                cursor += pool.tensor_parallel
            out[role] = workers
        return out

    # --- cross-field rules -----------------------------------------------------------------
    @model_validator(mode="after")
    def _check(self) -> Topology:
        for check in (self._check_name, self._check_architecture, self._check_placement,
                      self._check_pools,
                      self._check_parallelism, self._check_gpu_ids, self._check_gpu_budget,
                      self._check_checkpoint, self._check_memory, self._check_ports,
                      self._check_kv_buffer, self._check_autoscale):
            check()
        return self

    def _check_name(self) -> None:
        if not is_valid_name(self.name):
            raise ValueError(f"name {self.name[:60]!r} must be 2-40 lower-case letters, digits or "
                             "dashes, starting with a letter (it becomes a Kubernetes name)")

    def _check_architecture(self) -> None:
        if self.model.architecture is None and find_known_model(self.model.id) is None:
            raise ValueError(
                f"model.architecture is required: {self.model.id!r} is not in the catalog "
                "(llama-3.1-70b, llama-3.1-8b, qwen3-32b); add architecture: {layers, "
                "attention_heads, kv_heads, hidden_size, params_billion} from its config.json")

    def _check_placement(self) -> None:
        placement = self.placement
        if placement.hosts is not None:
            self._check_hosts(placement.hosts)
        if placement.slurm is not None:
            self._check_slurm(placement.slurm)
        if placement.kind.multi_node:
            coord = self.coordination
            for key, mode, url in (("etcd", coord.etcd.mode.value, coord.etcd.url),
                                   ("nats", coord.nats.mode.value, coord.nats.url)):
                host = (urlsplit(url).hostname or "") if url and mode == "external" else ""
                if host == "localhost" or host.startswith("127.") or host == "::1":
                    raise ValueError(
                        f"coordination.{key}.url {url} is a loopback address but placement "
                        f"is {placement.kind.value}: workers on other nodes cannot reach it; "
                        "use the server's cluster address or mode: embedded")

    def _check_hosts(self, hosts: HostsPlacement) -> None:
        names = [n.name for n in hosts.nodes]
        for index, node in enumerate(hosts.nodes):
            key = f"placement.hosts.nodes[{index}]"
            if not HOST_NAME_RE.fullmatch(node.name):
                raise ValueError(f"{key}.name {node.name!r} must be letters, digits, dots, "
                                 "dashes or underscores (it names node-<name>.sh)")
            if not ADDRESS_RE.fullmatch(node.address):
                raise ValueError(f"{key}.address {node.address!r} is not an IP address or host "
                                 "name; give the node's cluster-facing address, e.g. 10.0.0.2")
            if names.count(node.name) > 1:
                raise ValueError(f"{key}.name {node.name!r} is listed twice; name each node "
                                 "once")
            if node.gpus is not None and node.gpus > self.hardware.gpus_per_node:
                raise ValueError(f"{key}.gpus {node.gpus} is more than hardware.gpus_per_node "
                                 f"({self.hardware.gpus_per_node}); raise gpus_per_node")
        addresses = [n.address for n in hosts.nodes]
        if len(set(addresses)) != len(addresses):
            raise ValueError("placement.hosts.nodes share an address; give each node its own "
                             "cluster-facing address")
        if hosts.head is not None and hosts.head not in names:
            raise ValueError(f"placement.hosts.head {hosts.head!r} is not a node; use one of "
                             f"{names}")
        if len(names) != self.hardware.nodes:
            raise ValueError(f"placement.hosts lists {len(names)} nodes but hardware.nodes is "
                             f"{self.hardware.nodes}; set hardware.nodes: {len(names)}")

    def _check_slurm(self, slurm: SlurmPlacement) -> None:
        hw = self.hardware
        if slurm.nodes is not None and slurm.nodes != hw.nodes:
            raise ValueError(f"placement.slurm.nodes {slurm.nodes} differs from hardware.nodes "
                             f"({hw.nodes}); set one of them, or both to the same number")
        if (self.backend.needs_gpu and slurm.gpus_per_node is not None
                and slurm.gpus_per_node < hw.gpus_per_node):
            raise ValueError(f"placement.slurm.gpus_per_node {slurm.gpus_per_node} is below "
                             f"hardware.gpus_per_node ({hw.gpus_per_node}); request "
                             f"{hw.gpus_per_node} or lower hardware.gpus_per_node")
        for key in ("partition", "account", "job_name"):
            value = getattr(slurm, key)
            if value is not None and not SLURM_WORD_RE.fullmatch(value):
                raise ValueError(f"placement.slurm.{key} {value!r} must be letters, digits and "
                                 "_ . , @ + - (it goes on an #SBATCH line)")
        if not SLURM_TIME_RE.fullmatch(slurm.time_limit):
            raise ValueError(f"placement.slurm.time_limit {slurm.time_limit!r} is not a Slurm "
                             "time; use HH:MM:SS or D-HH:MM:SS")
        for line in slurm.sbatch_extra:
            if not line.startswith("-") or "\n" in line:
                raise ValueError(f"placement.slurm.sbatch_extra entry {line!r} must be one "
                                 "sbatch option such as --exclusive (no #SBATCH prefix)")

    def _check_pools(self) -> None:
        wanted = set(self.mode.pool_roles)
        for role in PoolRole:
            present = self.pools.get(role) is not None
            if role in wanted and not present:
                raise ValueError(f"pools.{role.value} is missing: mode {self.mode.value} needs "
                                 + " and ".join(f"pools.{r.value}" for r in self.mode.pool_roles))
            if role not in wanted and present:
                raise ValueError(f"pools.{role.value} is set but mode is {self.mode.value}; "
                                 f"remove it or set mode: "
                                 f"{'agg' if role is PoolRole.AGG else 'disagg'}")

    def _check_parallelism(self) -> None:
        arch = self.model.resolved_architecture()
        for role, pool in self.active_pools():
            tp = pool.tensor_parallel
            for what, heads in (("attention_heads", arch.attention_heads),
                                ("kv_heads", arch.kv_heads)):
                if heads % tp:
                    ok = [d for d in range(1, heads + 1) if heads % d == 0 and
                          arch.attention_heads % d == 0 and arch.kv_heads % d == 0]
                    raise ValueError(
                        f"pools.{role.value}.tensor_parallel {tp} does not divide the model's "
                        f"{what} ({heads}); use one of {ok}")
            largest_node = max(self.node_gpus())
            if tp > largest_node:
                fits = max(d for d in range(1, largest_node + 1) if arch.attention_heads % d == 0
                           and arch.kv_heads % d == 0) if largest_node else 0
                raise ValueError(
                    f"pools.{role.value}.tensor_parallel {tp} is more than the GPUs of the "
                    f"largest node ({largest_node}); a worker never spans nodes: use "
                    f"tensor_parallel {fits} (the largest that fits) and more workers")

    def _check_gpu_ids(self) -> None:
        seen: dict[int, str] = {}
        usable = self.usable_gpu_ids()
        per_node = self.hardware.gpus_per_node
        for role, pool in self.active_pools():
            if pool.gpu_ids is None:
                continue
            key = f"pools.{role.value}.gpu_ids"
            if len(pool.gpu_ids) != pool.workers:
                raise ValueError(f"{key} lists {len(pool.gpu_ids)} workers but workers is "
                                 f"{pool.workers}; give one list per worker")
            for ids in pool.gpu_ids:
                if len(ids) != pool.tensor_parallel:
                    raise ValueError(f"{key} entry {ids} has {len(ids)} GPUs but "
                                     f"tensor_parallel is {pool.tensor_parallel}")
                if len({i // per_node for i in ids}) > 1:
                    raise ValueError(f"{key} entry {ids} spans nodes; a worker's GPUs must be "
                                     f"on one node ({per_node} GPUs each)")
                for gpu in ids:
                    if gpu not in usable:
                        raise ValueError(f"{key}: GPU id {gpu} is not on any node (node n "
                                         f"holds n*{per_node} up to its GPU count)")
                    if gpu in seen:
                        raise ValueError(f"{key}: GPU id {gpu} is already used by "
                                         f"{seen[gpu]}; each GPU serves one worker")
                    seen[gpu] = key

    def _check_gpu_budget(self) -> None:
        counts = self.node_gpus()
        need, have = self.total_gpus, sum(counts)
        where = (f"{len(counts)} nodes x {self.hardware.gpus_per_node}"
                 if len(set(counts)) == 1 else "nodes with " + "+".join(map(str, counts)))
        if need > have:
            parts = ", ".join(f"{r.value} {p.workers}x{p.tensor_parallel}"
                              for r, p in self.active_pools())
            raise ValueError(
                f"pools need {need} GPUs ({parts}) but the placement has {have} ({where}); "
                "add nodes or shrink the pools")
        # Packing may fail even when the count fits (TP fragments nodes).
        usable = self.usable_gpu_ids()
        assignment = self.gpu_assignment()
        if any(g not in usable for workers in assignment.values() for ids in workers
               for g in ids):
            raise ValueError(
                f"pools need {need} GPUs but workers of these tensor_parallel sizes cannot be "
                f"packed into {where} without splitting a worker across nodes; add a node or "
                "change tensor_parallel")

    def _check_memory(self) -> None:
        # Checked for the mocker too: its topology describes the hardware it stands in for,
        # and `plan --mock` graphs must be as deployable as their trtllm twins.
        for role, _pool in self.active_pools():
            fit = self.memory_fit(role)
            if not fit.fits:
                raise ValueError(f"pools.{role.value}: {fit.explain()}")

    def _check_ports(self) -> None:
        used: dict[int, str] = {}

        def claim(port: int, owner: str) -> None:
            if port in used:
                raise ValueError(f"port {port} is used by both {used[port]} and {owner}; give "
                                 f"{owner} another port")
            used[port] = owner

        claim(self.frontend.port, ProcessKind.FRONTEND.port_key("http"))
        etcd = self.coordination.etcd
        if etcd.mode is EtcdMode.EMBEDDED:
            claim(etcd.client_port, ProcessKind.ETCD.port_key("client"))
            claim(etcd.peer_port, ProcessKind.ETCD.port_key("peer"))
        nats = self.coordination.nats
        if nats.mode is NatsMode.EMBEDDED:
            claim(nats.port, ProcessKind.NATS.port_key("client"))
        workers = sum(p.workers for _, p in self.active_pools())
        base = self.observability.system_port_base
        # Dynamo reads DYN_SYSTEM_PORT as a signed 16-bit number.
        if base + workers - 1 > MAX_SYSTEM_PORT:
            raise ValueError(f"observability.system_port_base {base} + {workers} workers "
                             f"passes {MAX_SYSTEM_PORT}, the highest system port Dynamo "
                             f"accepts; set it to {MAX_SYSTEM_PORT - workers + 1} or lower")
        for i in range(workers):
            claim(base + i, f"worker {i} system port ({ProcessKind.WORKER.port_key('system', i)})")

    def _check_checkpoint(self) -> None:
        # The mocker loads a tokenizer only; every other backend loads the weights, and the
        # memory fit above assumes they are in model.dtype.
        model = self.model
        if not self.backend.needs_gpu or not model.dtype.needs_quantized_checkpoint:
            return
        known = find_known_model(model.id)
        holds = known.dtype_of(model.id) if known else None
        if holds == model.dtype.value:
            return
        if holds is None and model.prequantized:
            return
        wanted = known.checkpoint(model.dtype.value) if known else None
        fix = (f"set model.id: {wanted.hf_id} ({wanted.source})" if wanted else
               f"quantize it to {model.dtype.value} with NVIDIA Model Optimizer, set model.id "
               "to the result and model.prequantized: true")
        if holds:
            tp = min(pool.tensor_parallel for _, pool in self.active_pools())
            gib = model.resolved_architecture().params_billion * 1e9 / tp / GIB
            what = (f"is the {holds} checkpoint: TRT-LLM would load "
                    f"{gib * WeightDtype(holds).bytes_per_param:.1f} GiB of weights per GPU at "
                    f"TP{tp}, not {gib * model.dtype.bytes_per_param:.1f}")
        else:
            what = (f"is not known to hold {model.dtype.value} weights (TRT-LLM loads what the "
                    "checkpoint holds)")
        raise ValueError(
            f"model.dtype is {model.dtype.value} but model.id {model.id!r} {what}; {fix}"
            + ("" if holds else " (or set model.prequantized: true if it already is)"))

    def _check_autoscale(self) -> None:
        scale = self.autoscale
        if scale is None:
            return
        budget = scale.max_gpus or self.hardware.total_gpus
        floor = sum(scale.floor(role) * pool.tensor_parallel
                    for role, pool in self.active_pools())
        if floor > budget:
            raise ValueError(
                f"autoscale.max_gpus {budget} is below the GPUs the pools' min_replicas "
                f"need ({floor}); raise max_gpus or lower min_replicas")
        for role, pool in self.active_pools():
            if scale.floor(role) > pool.workers:
                raise ValueError(
                    f"autoscale.{role.value}.min_replicas {scale.floor(role)} is above "
                    f"pools.{role.value}.workers ({pool.workers}), the replicas it starts "
                    f"with; raise workers or lower min_replicas")

    def _check_kv_buffer(self) -> None:
        if self.mode is not Mode.DISAGG:
            return
        buffer = self.kv_buffer_tokens
        if buffer < self.model.max_input_tokens:
            raise ValueError(
                f"kv_transfer.max_tokens_in_buffer {buffer} is below model.max_input_tokens "
                f"({self.model.max_input_tokens}); the longest prompt's KV could not be sent; "
                f"set it to at least {self.model.max_input_tokens}")
