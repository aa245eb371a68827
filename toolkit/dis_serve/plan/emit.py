"""The chosen plan as a topology: the same file `validate`, `render` and `up` read.

Built as a `Topology` object (so every schema check runs before anything is written) and
dumped with `yaml.safe_dump`. The trtllm graph is what an H100 host runs; the mock graph is
the same pools on Dynamo's mocker, timed by the plan's profile tables, with the KV-cache
size of the planned GPUs, so `dis-serve up` + `bench` on a CPU machine behave like it.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from pydantic import ValidationError

from ..errors import RunError
from ..topology import Backend, Mode, PoolRole, Topology
from .perf_model import ModelOnGpu
from .predict import kv_transfer_gbps
from .replay import BLOCK_SIZE, kv_blocks
from .request import PlanRequest, Workload
from .search import Candidate


def graph_name(request: PlanRequest, plan: Candidate, mock: bool) -> str:
    model = re.sub(r"[^a-z0-9]+", "-", request.target().name.lower()).strip("-")
    name = f"{model}-{plan.mode.value}-{plan.gpus}g" + ("-mock" if mock else "")
    return name[:40].rstrip("-")


def plan_topology(plan: Candidate, request: PlanRequest, workload: Workload, *,
                  mock: bool = False, profile: Path | None = None) -> Topology:
    target = request.target()
    known = request.known_model
    assert known is not None
    pools = {pool.role.value: pool.spec.model_dump(exclude_unset=True) for pool in plan.pools}
    data: dict = {
        "name": graph_name(request, plan, mock),
        # The checkpoint that holds the planned weight format (TRT-LLM never quantizes).
        "model": {"id": _checkpoint_id(request), "dtype": request.dtype.value,
                  "kv_cache_dtype": request.kv_cache_dtype.value,
                  "max_input_tokens": workload.max_isl, "max_output_tokens": workload.max_osl},
        "hardware": {"gpu": request.gpu.value, "gpus_per_node": request.gpus_per_node,
                     "nodes": math.ceil(plan.gpus / request.gpus_per_node)},
        "backend": (Backend.MOCKER if mock else Backend.TRTLLM).value,
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
        data["mocker"] = {"num_gpu_blocks": _mock_blocks(target, plan)}
        if profile is not None:
            data["mocker"]["profile_data"] = str(profile.resolve())
        if plan.mode is Mode.DISAGG:
            # The same link speed the prediction and the replay charge for shipping KV.
            prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
            data["mocker"]["kv_transfer_bandwidth_gbps"] = kv_transfer_gbps(
                prefill.tp, decode.tp, plan.gpus > request.gpus_per_node)
    # TP sizes are powers of two no wider than a node, so packing pools in order never
    # strands a GPU: ceil(GPUs / node) nodes always hold them.
    try:
        return Topology.model_validate(data)
    except ValidationError as exc:  # a planner bug, not the user's input
        raise RunError(f"the planned topology does not validate: {exc}") from exc


def _checkpoint_id(request: PlanRequest) -> str:
    known = request.known_model
    assert known is not None
    checkpoint = known.checkpoint(request.dtype.value)
    return checkpoint.hf_id if checkpoint is not None else known.hf_id


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
