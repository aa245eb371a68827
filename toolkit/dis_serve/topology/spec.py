"""The topology's sections and its derived views, before the cross-field rules.

`Topology` (graph.py) is this class with `rules.py` applied; the rules read these fields and
views, which is why the two are separate classes (rules.py imports this module, and graph.py
imports both, so no module imports another that imports it back).
"""

from __future__ import annotations

import hashlib
import ipaddress
import json

from pydantic import Field, field_validator

from ..builtin import template_kv_share
from ..hardware.catalog import GPUS
from ..hardware.sizing import MemoryFit, fit_worker_memory
from .autoscale import Autoscale
from .base import Strict
from .coordination import Coordination
from .enums import DEFAULT_BACKEND, Backend, EtcdMode, EventPlane, Mode, NatsMode, PoolRole
from .frontend import Frontend, Router
from .kubernetes import Kubernetes
from .model import Hardware, Model
from .placement import Placement, PlacementKind
from .pools import KvCache, KvTransfer, Mocker, Observability, Pool, Pools
from .security import Security
from .supervision import Supervision

# A 16-bit weight, as a quantized checkpoint keeps its embeddings and output head.
_HALF_BYTES = 2.0
# The files of a model repository beside its weights (tokenizer, configs, the index),
# generously.
_SIDE_FILES_GB = 0.1

# The topology file's format. A file without `schema_version` is read as version 1 (every
# file before the key existed); `validate` notes it. A change that old files cannot be read
# under raises this, and the loader says which version a file needs.
TOPOLOGY_SCHEMA_VERSION = 1


class TopologySpec(Strict):
    """The fields of `Topology`, with no cross-field rule applied: use `Topology`."""

    schema_version: int = Field(
        default=TOPOLOGY_SCHEMA_VERSION, ge=1,
        description=f"The file's format version ({TOPOLOGY_SCHEMA_VERSION}). A file without "
                    "it is read as version 1 (`validate` notes that); a version newer than "
                    "this dis-serve reads is refused.")
    name: str = Field(
        default="demo",
        description="Graph name: Dynamo namespace, run directory and Kubernetes name. "
                    "Lower-case letters, digits and dashes.")
    model: Model = Field(description="The model being served.")
    hardware: Hardware = Field(default_factory=Hardware, description="The GPUs.")
    backend: Backend = Field(default=DEFAULT_BACKEND, description=f"{' | '.join(Backend)}.")
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
        description="Dynamo's planner, which adds and removes workers as the load changes: a "
                    "process of the graph on every placement (on Kubernetes, a `planner` "
                    "component); off unless set.")
    security: Security = Field(
        default_factory=Security,
        description="TLS and authentication on etcd, NATS, the request plane and the "
                    "frontend.")

    @field_validator("schema_version")
    @classmethod
    def _readable_version(cls, value: int) -> int:
        if value > TOPOLOGY_SCHEMA_VERSION:
            raise ValueError(f"version {value} is newer than this dis-serve reads "
                             f"({TOPOLOGY_SCHEMA_VERSION}); upgrade dis-serve")
        return value

    # --- derived views -------------------------------------------------------------------
    @property
    def version_note(self) -> str | None:
        """What to tell the user about a file that does not say its version."""
        if "schema_version" in self.model_fields_set:
            return None
        return (f"no schema_version: read as version {TOPOLOGY_SCHEMA_VERSION} (add "
                f"`schema_version: {TOPOLOGY_SCHEMA_VERSION}` to pin the format it is "
                "written in)")

    @property
    def namespace(self) -> str:
        return "dis-serve-" + self.name

    @property
    def digest(self) -> str:
        """A short hash of every setting: two runs of the same digest ran the same topology
        (the file format's version is no setting: a file that gains it keeps its digest)."""
        text = json.dumps(self.model_dump(mode="json", exclude={"schema_version"}),
                          sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def active_pools(self) -> list[tuple[PoolRole, Pool]]:
        return [(role, pool) for role in self.mode.pool_roles
                if (pool := self.pools.get(role)) is not None]

    @property
    def total_gpus(self) -> int:
        return sum(pool.gpus for _, pool in self.active_pools())

    @property
    def checkpoint_gb(self) -> float:
        """Decimal GB of the checkpoint's weight files, what the workers load and the model
        cache holds: every parameter in the checkpoint's format, except that a quantized
        checkpoint keeps the input embeddings and the output head (vocabulary x hidden each)
        at 16 bits (ModelOpt's FP8 exports exclude lm_head; an embedding is no linear
        layer)."""
        arch = self.model.resolved_architecture()
        bytes_per_param = self.model.dtype.bytes_per_param
        embeddings = 2 * arch.vocab_size * arch.hidden_size / 1e9
        return ((arch.params_billion - embeddings) * bytes_per_param
                + embeddings * max(bytes_per_param, _HALF_BYTES))

    @property
    def model_files_gb(self) -> float:
        """Decimal GB a download of the model fetches: for a GPU engine the weights and the
        files beside them (never the second copies NVIDIA's recipes exclude), for the mocker
        its tokenizer and config files only."""
        return _SIDE_FILES_GB + (self.checkpoint_gb if self.backend.needs_gpu else 0.0)

    def max_workers(self, role: PoolRole) -> int | None:
        """The pool's ceiling for `scale`, `apply` and the planner: its max_workers, else
        `workers` on Slurm (the job holds no spare GPUs), else None (the nodes' free GPUs
        decide)."""
        pool = self.pools.get(role)
        assert pool is not None
        if pool.max_workers is not None:
            return pool.max_workers
        return pool.workers if self.placement.kind is PlacementKind.SLURM else None

    @property
    def ceiling_gpus(self) -> int:
        """GPUs the pools need at their ceilings (a pool without one counts its workers)."""
        return sum((self.max_workers(role) or pool.workers) * pool.tensor_parallel
                   for role, pool in self.active_pools())

    @property
    def kv_buffer_tokens(self) -> int:
        """The cache transceiver's buffer: the smallest power of two above the longest input
        (Dynamo's engine_configs/deepseek-r1/disagg/simple/prefill.yaml: 'Must exceed max
        ISL to avoid transfer failures and perf degradation', 16384 for 8192)."""
        if self.kv_transfer.max_tokens_in_buffer is not None:
            return self.kv_transfer.max_tokens_in_buffer
        return 1 << self.model.max_input_tokens.bit_length()

    @property
    def off_loopback_because(self) -> str | None:
        """What makes the graph listen beyond loopback, in words (None: nothing does)."""
        if self.placement.kind.multi_node:
            return f"placement {self.placement.kind.value}"
        host = self.frontend.local_host
        if host != "localhost" and not ipaddress.ip_address(host).is_loopback:
            return f"frontend.host {host}"
        if self.coordination.event_plane is EventPlane.ZMQ:
            return "coordination.event_plane zmq, which binds every interface"
        return None

    @property
    def frontend_https(self) -> bool:
        """Whether the OpenAI endpoint speaks HTTPS: as `security.tls.frontend` says, by
        default when the frontend is reachable beyond loopback (a multi-node placement, a
        frontend.host that is not loopback)."""
        host = self.frontend.local_host
        exposed = self.placement.kind.multi_node or (
            host != "localhost" and not ipaddress.ip_address(host).is_loopback)
        return self.security.frontend_tls(exposed)

    @property
    def frontend_replicas(self) -> int:
        """Frontends the graph runs: `frontend.replicas`, else 2 on a hosts or Slurm graph of
        two or more nodes (each on its own node) and 1 otherwise (or without a balancer)."""
        if self.frontend.replicas is not None:
            return self.frontend.replicas
        multi = self.placement.kind.multi_node and len(self.node_gpus()) >= 2
        return 2 if multi and self.frontend.balancer else 1

    @property
    def local_frontend_replicas(self) -> int:
        """Frontends when the graph runs on this machine alone (`up` of a local graph, the
        local target of any): `frontend.replicas`, else 1."""
        return self.frontend.replicas or 1

    @property
    def etcd_members(self) -> int:
        """Members of the embedded etcd (0 when etcd is external): `coordination.etcd.
        members`, else 3 on a hosts or Slurm graph of three or more nodes and 1 otherwise."""
        etcd = self.coordination.etcd
        if etcd.mode is not EtcdMode.EMBEDDED:
            return 0
        if etcd.members is not None:
            return etcd.members
        return 3 if self.placement.kind.multi_node and len(self.node_gpus()) >= 3 else 1

    @property
    def nats_members(self) -> int:
        """Members of the embedded NATS (0 when it is external or off): `coordination.nats.
        members`, else one on every node of a hosts or Slurm graph and 1 on one machine."""
        nats = self.coordination.nats
        if nats.mode is not NatsMode.EMBEDDED:
            return 0
        if nats.members is not None:
            return nats.members
        return len(self.node_gpus()) if self.placement.kind.multi_node else 1

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
            tensor_parallel=pool.tensor_parallel, batch=pool.max_batch_size, seq_len=seq,
            kv_share=self.kv_share(role))

    def kv_share(self, role: PoolRole) -> float:
        """The pool's free_gpu_memory_fraction, else its role template's."""
        pool = self.pools.get(role)
        assert pool is not None
        share = pool.free_gpu_memory_fraction
        return share if share is not None else template_kv_share(role.value)

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
