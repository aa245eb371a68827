"""The chosen plan as a topology: the same file `validate`, `render` and `up` read.

Built as a `Topology` object (so every schema check runs before anything is written) and
dumped with `yaml.safe_dump`. The trtllm graph is what an H100 host runs; the mock graph is
the same pools on Dynamo's mocker, timed by the plan's profile tables, with the KV-cache
size of the planned GPUs, so `dis-serve up` + `bench` on a CPU machine behave like it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..engines import planned_engine, twin_engine
from ..engines.base import TwinTiming
from ..errors import RunError
from ..hardware.catalog import find_known_model
from ..topology import TOPOLOGY_SCHEMA_VERSION, Mode, PoolRole, Topology
from .perf_model import ModelOnGpu
from .predict import kv_transfer_gbps
from .replay import BLOCK_SIZE, kv_blocks
from .request import PlanRequest, Workload
from .search import Candidate

PLAN_FILE = "plan.json"
# An emitted topology's first comment names its plan, so a `bench` of the graph finds it
# wherever `--emit` put the file (the mocker graph also finds it beside its profile).
PLAN_HEADER = "plan: "


def plan_file_named_in(topology_file: Path) -> Path | None:
    """The plan an emitted topology's header names (None: not an emitted topology)."""
    try:
        with topology_file.open(encoding="utf-8") as text:
            for line in text:
                if not line.startswith("#"):
                    return None
                if line.startswith(f"# {PLAN_HEADER}"):
                    return Path(line.removeprefix(f"# {PLAN_HEADER}").strip())
    except OSError:
        return None
    return None


def graph_name(request: PlanRequest, plan: Candidate, mock: bool) -> str:
    model = re.sub(r"[^a-z0-9]+", "-", request.target().name.lower()).strip("-")
    name = f"{model}-{plan.mode.value}-{plan.gpus}g" + ("-mock" if mock else "")
    return name[:40].rstrip("-")


def plan_topology(plan: Candidate, request: PlanRequest, workload: Workload, *,
                  mock: bool = False, profile: Path | None = None) -> Topology:
    target = request.target()
    pools = _pools_section(plan, request)
    data: dict = {
        "schema_version": TOPOLOGY_SCHEMA_VERSION,
        "name": graph_name(request, plan, mock),
        # The checkpoint that holds the planned weight format (TRT-LLM never quantizes).
        "model": _model_section(request, workload),
        "hardware": {"gpu": request.gpu.value, "gpus_per_node": request.gpus_per_node,
                     "nodes": math.ceil(plan.gpus / request.gpus_per_node)},
        "backend": (twin_engine() if mock else planned_engine()).backend.value,
        "mode": plan.mode.value,
        "pools": pools,
        "kv_cache": {"block_size": BLOCK_SIZE},
        # What the Kubernetes frontend's CPU is sized for.
        "frontend": {"planned_rate_per_s": round(plan.rate, 2)},
    }
    if request.price_per_gpu_hour is not None:
        data["hardware"]["price_per_gpu_hour"] = request.price_per_gpu_hour
    if request.autoscale and not mock:
        # Dynamo's SLA planner keeps the plan's targets on Kubernetes within its GPU count.
        data["autoscale"] = {"ttft_ms": request.ttft_ms, "itl_ms": request.itl_ms,
                             "max_gpus": plan.gpus}
    if mock:
        data |= _twin_sections(target, plan, request, profile)
    # TP sizes are powers of two no wider than a node, so packing pools in order never
    # strands a GPU: ceil(GPUs / node) nodes always hold them.
    if not mock and request.placement.multi_node:
        data["placement"] = _cluster_placement(request, data["hardware"]["nodes"], plan.mode)
        layout = kv_local_layout(plan, request.gpus_per_node)
        if layout is not None:
            for role, ids in layout.gpu_ids.items():
                pools[role.value]["gpu_ids"] = ids
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:  # a planner bug, not the user's input
        raise RunError(f"the planned topology does not validate: {exc}") from exc


def _cluster_placement(request: PlanRequest, nodes: int, mode: Mode) -> dict:
    from ..placements.registry import placement_of

    # The prediction charges KV transfer between nodes at one 400 Gb/s RDMA NIC per GPU.
    kv = {"interconnect": "rdma"} if mode is Mode.DISAGG and nodes > 1 else {}
    return placement_of(request.placement).topology_section(nodes) | kv


@dataclass(frozen=True)
class KvLayout:
    """Explicit GPUs per worker that put prefill workers on the nodes of decode workers."""

    gpu_ids: dict[PoolRole, list[list[int]]]
    local_prefill: int
    """Prefill workers that share a node with a decode worker (their KV stays on NVLink)."""
    prefill_workers: int

    def describe(self) -> str:
        if self.local_prefill == self.prefill_workers:
            return "every prefill worker shares a node with a decode worker"
        away = self.prefill_workers - self.local_prefill
        return (f"{away} of {self.prefill_workers} prefill workers share no node with a "
                "decode worker (too few decode workers to go round)")


def placement_note(plan: Candidate, request: PlanRequest) -> str | None:
    """What the trtllm topology's cluster placement does for KV locality (None: it runs on
    one machine)."""
    if not request.placement.multi_node:
        return None
    nodes = math.ceil(plan.gpus / request.gpus_per_node)
    where = (f"{request.placement.value} placement on {nodes} node(s) of "
             f"{request.gpus_per_node} GPUs")
    if plan.mode is Mode.AGG:
        return f"{where}; aggregated workers move no KV cache between nodes."
    layout = kv_local_layout(plan, request.gpus_per_node)
    if layout is None:
        return (f"{where}; pools packed in order (prefill could not be placed beside decode "
                "on these nodes), so KV transfer crosses the network.")
    return (f"{where}, KV over RDMA between nodes; prefill workers placed beside decode "
            f"workers where the split allows: {layout.describe()}. Dynamo's router picks a "
            "decode worker by load, not by node, so the prediction charges the network's "
            "bandwidth for every transfer of a multi-node plan.")


def kv_local_layout(plan: Candidate, gpus_per_node: int) -> KvLayout | None:
    """Decode workers spread over the nodes, then prefill workers on the nodes that hold a
    decode worker first, so a prompt's KV cache moves over NVLink where the split allows
    (None: an aggregated plan, or one this greedy packing cannot place)."""
    if plan.mode is not Mode.DISAGG:
        return None
    prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
    nodes = math.ceil(plan.gpus / gpus_per_node)
    free = [gpus_per_node] * nodes
    has_decode = [False] * nodes
    placed: dict[PoolRole, list[list[int]]] = {PoolRole.PREFILL: [], PoolRole.DECODE: []}
    for i in range(decode.workers):
        node = next((n for n in [*range(i % nodes, nodes), *range(i % nodes)]
                     if free[n] >= decode.tp), None)
        if node is None:
            return None
        placed[PoolRole.DECODE].append(_take(free, node, decode.tp, gpus_per_node))
        has_decode[node] = True
    local = 0
    for _ in range(prefill.workers):
        fits = [n for n in range(nodes) if free[n] >= prefill.tp]
        if not fits:
            return None
        node = max(fits, key=lambda n: (has_decode[n], free[n]))
        local += has_decode[node]
        placed[PoolRole.PREFILL].append(_take(free, node, prefill.tp, gpus_per_node))
    placed[PoolRole.PREFILL].sort()
    return KvLayout(placed, local, prefill.workers)


def _take(free: list[int], node: int, tp: int, gpus_per_node: int) -> list[int]:
    """The next `tp` free GPUs of `node`, as global ids (node n holds n * gpus_per_node ...)."""
    first = node * gpus_per_node + gpus_per_node - free[node]
    free[node] -= tp
    return list(range(first, first + tp))


def _pools_section(plan: Candidate, request: PlanRequest) -> dict:
    pools = {pool.role.value: pool.spec.model_dump(exclude_unset=True) for pool in plan.pools}
    if request.kv_memory_fraction is not None:
        # The KV cache the plan sized batches for, not the template's.
        for role in (PoolRole.DECODE, PoolRole.AGG):
            if role.value in pools:
                pools[role.value]["free_gpu_memory_fraction"] = request.kv_memory_fraction
    return pools


def _model_section(request: PlanRequest, workload: Workload) -> dict:
    known = request.known_model
    assert known is not None
    model: dict = {"id": _checkpoint_id(request), "dtype": request.dtype.value,
                   "kv_cache_dtype": request.kv_cache_dtype.value,
                   "max_input_tokens": workload.max_isl, "max_output_tokens": workload.max_osl}
    if request.checkpoint is None:
        return model
    model["prequantized"] = request.dtype.needs_quantized_checkpoint
    if find_known_model(request.checkpoint) is not known:
        # A path or an id the catalog does not know: the checks need the facts spelt out.
        arch = known.architecture
        model["architecture"] = {
            "layers": arch.layers, "attention_heads": arch.attention_heads,
            "kv_heads": arch.kv_heads, "hidden_size": arch.hidden_size,
            "params_billion": arch.params_billion, "vocab_size": arch.vocab_size,
            "max_position_embeddings": arch.max_position_embeddings}
        if arch.explicit_head_dim is not None:
            model["architecture"]["head_dim"] = arch.explicit_head_dim
    return model


def _checkpoint_id(request: PlanRequest) -> str:
    if request.checkpoint is not None:
        return request.checkpoint
    known = request.known_model
    assert known is not None
    checkpoint = known.checkpoint(request.dtype.value)
    return checkpoint.hf_id if checkpoint is not None else known.hf_id


def _twin_sections(target: ModelOnGpu, plan: Candidate, request: PlanRequest,
                   profile: Path | None) -> dict:
    """What the mock graph's engine reads to imitate the planned one (engines/)."""
    gbps = None
    if plan.mode is Mode.DISAGG:
        # The same link speed the prediction and the replay charge for shipping KV.
        prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
        gbps = kv_transfer_gbps(prefill.tp, decode.tp, plan.gpus > request.gpus_per_node)
    twin = twin_engine().twin_settings
    assert twin is not None
    return twin(TwinTiming(num_gpu_blocks=_mock_blocks(target, plan),
                           profile_data=None if profile is None else str(profile.resolve()),
                           kv_transfer_bandwidth_gbps=gbps))


def _mock_blocks(target: ModelOnGpu, plan: Candidate) -> int:
    # The mocker takes one KV size for every worker: size it for the pool where KV capacity
    # decides admission (decode or aggregated); prefill workers only hold prompts in flight.
    role = PoolRole.AGG if plan.mode is Mode.AGG else PoolRole.DECODE
    return kv_blocks(target, plan.pool(role))


def topology_yaml(topo: Topology, header: str) -> str:
    # Exactly the keys the plan decided (defaults it relied on stay implicit, as a person
    # would write the file).
    body = yaml.safe_dump(topo.model_dump(mode="json", exclude_unset=True),
                          sort_keys=False, default_flow_style=False, width=100)
    comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comments + body


def write_topology(topo: Topology, path: Path, header: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(topology_yaml(topo, header))
    return path
