"""What an engine is to dis-serve: the one interface every engine module fills in.

An engine (TensorRT-LLM, the mocker) is the program a graph's workers run. Its module says
everything that differs between engines: the worker's Python module and flags, its
environment, its container image, the config files it reads, whether its TP ranks are one
MPI job, what must be installed to run it, the metric names its workers publish, and the
names the planner's models know it by. Where it runs (addresses, paths, srun, pods) is the
placement's, passed in as parameters: an engine never names a placement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from ..topology import Backend, PoolRole, Topology

# The Dynamo release every NVIDIA image named here carries (ai-dynamo 1.6.1 is what
# dis-serve runs against).
DYNAMO_VERSION = "1.6.1"
DYNAMO_IMAGES = "nvcr.io/nvidia/ai-dynamo"


def dynamo_image(name: str) -> str:
    """NVIDIA's image `name` of this Dynamo release."""
    return f"{DYNAMO_IMAGES}/{name}:{DYNAMO_VERSION}"


class WorkerSite(Protocol):
    """What a worker's flags need from where it runs (render/dynamo_argv.TargetParams is
    one): the model as the worker sees it, the Dynamo namespace (None where the platform
    supplies it) and where each role's engine config lies."""

    @property
    def model_path(self) -> str: ...

    @property
    def namespace(self) -> str | None: ...

    def engine_config(self, role: PoolRole) -> str: ...


@dataclass(frozen=True)
class EngineMetrics:
    """The names of the figures an engine's workers publish on their `/metrics` (None: they
    publish none); `top`, bench's server figures and the dashboards read them."""

    FIGURES: ClassVar = ("kv_usage", "queue", "kv_transfer_latency", "kv_transfer_speed")
    kv_usage: str | None = None  # gauge: the fraction of the worker's KV blocks in use
    queue: str | None = None  # gauge: requests waiting in the engine
    kv_transfer_latency: str | None = None  # histogram: measured KV transfers
    kv_transfer_speed: str | None = None  # histogram
    deprecated: tuple[str, ...] = ()  # names it still publishes that readers avoid


@dataclass(frozen=True)
class PythonRequirement:
    """A Python module a local worker of the engine imports, and the one line that says how
    to get it when it is missing."""

    module: str
    missing: str


@dataclass(frozen=True)
class TwinTiming:
    """What the planner knows about a planned graph that an engine imitating it takes: KV
    blocks per worker, the timing data, the KV link speed (None: not disaggregated)."""

    num_gpu_blocks: int
    profile_data: str | None
    kv_transfer_bandwidth_gbps: float | None


def no_engine_configs(topo: Topology) -> dict[PoolRole, dict[str, Any]]:
    return {}


@dataclass(frozen=True)
class Engine:
    """One engine, as its module (engines/<name>.py) declares it."""

    backend: Backend  # the topology's `backend` value
    title: str  # its name in messages
    module: str  # the Python module a worker runs as where dis-serve starts it
    image: str  # the container image its workers run in
    k8s_component_prefix: str  # how Dynamo's DGD examples begin its components' names
    # The flags of a worker of a pool role, where it runs.
    worker_args: Callable[[Topology, PoolRole, WorkerSite], list[str]]
    # The environment its workers get on every target; a target adds only its own parts
    # (addresses, paths, devices).
    worker_env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # The config file of each pool role its workers read ({}: none).
    engine_configs: Callable[[Topology], dict[PoolRole, dict[str, Any]]] = no_engine_configs
    # Its workers read a model card only (config and tokenizer, no weights).
    needs_model_card: bool = False
    dgd_backend_framework: str | None = None  # the DGD's spec.backendFramework
    # NVIDIA runs its workers from `image`, not from a node's own software: a cluster job
    # names an image (or says it runs without one).
    runs_in_image: bool = False
    # The command that makes a worker's TP ranks one MPI job when the placement starts
    # them as tasks of one step (None: one process per worker).
    mpi_launcher: str | None = None
    # Where that launcher's rank 0 looks for a free TCP port, closes it and binds it moments
    # later (None: it takes no port): two leaders starting at once on one node can pick the
    # same one, so a placement starts one leader at a time per node.
    mpi_leader_port_from: int | None = None
    requires: PythonRequirement | None = None  # what a local worker imports (preflight)
    # What one worker adds to a machine's memory, MiB of unique memory as measured
    # (launch/preflight.py says how); None: it depends on the model.
    worker_uss_mib: int | None = None
    # Installed distributions that decide what its runs measure (the fingerprint's).
    distributions: tuple[str, ...] = ()
    metrics: EngineMetrics = field(default_factory=EngineMetrics)
    # The planner sizes graphs of the engine AIConfigurator models, by this name.
    aiconfigurator_backend: str | None = None
    # The engine type Dynamo's mocker and replay simulate it as.
    replay_backend: str | None = None
    # The topology sections of a graph of this engine that imitates a planned one (the
    # planner's mock graph); None: it imitates nothing.
    twin_settings: Callable[[TwinTiming], dict[str, Any]] | None = None

    # The module a worker runs as in `image`, which has no dis-serve (None: `module`).
    image_module: str | None = None

    @property
    def module_in_image(self) -> str:
        return self.image_module or self.module

    @property
    def uses_engine_config(self) -> bool:
        return self.engine_configs is not no_engine_configs
