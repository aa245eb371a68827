"""The topology schema: the single truth about a dis-serve graph.

Everything else (validation messages, rendering, launching, benchmarking, planning) reads these
models. Validators here are pure: they look at the topology and the catalog, never at the
machine (ports in use, binaries, GPUs present are preflight's job).

One module per area; import from here (`from dis_serve.topology import Topology, PoolRole`):

- base: the strict base model, ports, the graph-name rule
- enums: backends, modes, pool roles, process kinds, dtypes, router and plane modes, and
  their Dynamo names
- model: the model served and the hardware
- pools, frontend, coordination, kubernetes, autoscale, placement, supervision, security:
  the sections
- spec: the root's fields and derived views; rules: its cross-field rules; graph: `Topology`
- packing: which GPUs each worker gets
"""

from .autoscale import Autoscale, AutoscaleTarget, LoadThresholds
from .base import MAX_SYSTEM_PORT, NAME_RE, Port, Strict, is_valid_name
from .coordination import ENV_NAME_RE, Coordination, Etcd, Nats, NatsAuth
from .enums import (
    DEFAULT_BACKEND,
    Backend,
    EtcdMode,
    EventPlane,
    KvCacheDtype,
    KvTransferBackend,
    Mode,
    NatsMode,
    PoolRole,
    ProcessKind,
    RequestPlane,
    RouterMode,
    WeightDtype,
)
from .frontend import MAX_FRONTEND_REPLICAS, FloatingAddress, Frontend, Router
from .graph import Topology
from .kubernetes import (
    DIGEST_RE,
    K8S_NAME_RE,
    QUANTITY_RE,
    REVISION_RE,
    CertificateSource,
    ComputeResources,
    Digest,
    IssuerRef,
    K8sName,
    Kubernetes,
    KubernetesTls,
    ModelCache,
    PodSecurity,
    Quantity,
    Rdma,
    RdmaProfile,
    Revision,
    ServiceExposure,
    Toleration,
    quantity_bytes,
)
from .model import (
    MAX_MODEL_ID_BYTES,
    MAX_PATH_COMPONENT_BYTES,
    MAX_SERVED_NAME_BYTES,
    Architecture,
    Hardware,
    Model,
)
from .packing import pack_gpus
from .placement import (
    ADDRESS_RE,
    HOST_NAME_RE,
    SLURM_TIME_RE,
    SLURM_WORD_RE,
    HostNode,
    HostsPlacement,
    KvInterconnect,
    Placement,
    PlacementKind,
    SlurmPlacement,
)
from .pools import MAX_BLOCK_SIZE, KvCache, KvTransfer, Mocker, Observability, Pool, Pools
from .security import Security, Tls, TlsMode, exposure_problem, security_warnings
from .spec import TOPOLOGY_SCHEMA_VERSION, TopologySpec
from .supervision import Liveness, Restart, Supervision

__all__ = [
    "ADDRESS_RE",
    "DEFAULT_BACKEND",
    "DIGEST_RE",
    "ENV_NAME_RE",
    "HOST_NAME_RE",
    "K8S_NAME_RE",
    "MAX_BLOCK_SIZE",
    "MAX_FRONTEND_REPLICAS",
    "MAX_MODEL_ID_BYTES",
    "MAX_PATH_COMPONENT_BYTES",
    "MAX_SERVED_NAME_BYTES",
    "MAX_SYSTEM_PORT",
    "NAME_RE",
    "QUANTITY_RE",
    "REVISION_RE",
    "SLURM_TIME_RE",
    "SLURM_WORD_RE",
    "TOPOLOGY_SCHEMA_VERSION",
    "Architecture",
    "Autoscale",
    "AutoscaleTarget",
    "Backend",
    "CertificateSource",
    "ComputeResources",
    "Coordination",
    "Digest",
    "Etcd",
    "EtcdMode",
    "EventPlane",
    "FloatingAddress",
    "Frontend",
    "Hardware",
    "HostNode",
    "HostsPlacement",
    "IssuerRef",
    "K8sName",
    "Kubernetes",
    "KubernetesTls",
    "KvCache",
    "KvCacheDtype",
    "KvInterconnect",
    "KvTransfer",
    "KvTransferBackend",
    "Liveness",
    "LoadThresholds",
    "Mocker",
    "Mode",
    "Model",
    "ModelCache",
    "Nats",
    "NatsAuth",
    "NatsMode",
    "Observability",
    "Placement",
    "PlacementKind",
    "PodSecurity",
    "Pool",
    "PoolRole",
    "Pools",
    "Port",
    "ProcessKind",
    "Quantity",
    "Rdma",
    "RdmaProfile",
    "RequestPlane",
    "Restart",
    "Revision",
    "Router",
    "RouterMode",
    "Security",
    "ServiceExposure",
    "SlurmPlacement",
    "Strict",
    "Supervision",
    "Tls",
    "TlsMode",
    "Toleration",
    "Topology",
    "TopologySpec",
    "WeightDtype",
    "exposure_problem",
    "is_valid_name",
    "pack_gpus",
    "quantity_bytes",
    "security_warnings",
]
