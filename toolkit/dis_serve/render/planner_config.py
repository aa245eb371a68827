"""Topology `autoscale` -> the config of Dynamo 1.6.1's planner (`python -m dynamo.planner
--config JSON`), for Kubernetes (`environment: kubernetes`: the operator scales the DGD) and
for every other placement (`environment: virtual`: the planner writes its decisions to etcd
and dis-serve's supervisor carries them out and acknowledges them). A dict of the fields of
Dynamo's own `PlannerConfig`, which the tests validate it with. Pure.
"""

from __future__ import annotations

from typing import Any

from ..planner_ceilings import plugin_entry
from ..topology import Mode, PoolRole, Topology

# Dynamo's planner environment off Kubernetes (the Kubernetes placement names its own:
# placements/kubernetes/planner.py).
VIRTUAL = "virtual"


def planner_config(topo: Topology, environment: str) -> dict[str, Any]:
    scale = topo.autoscale
    assert scale is not None
    target = scale.resolved_target
    config: dict[str, Any] = {
        "environment": environment,
        "backend": topo.backend.value,
        "mode": topo.mode.value,
        "optimization_target": target.value,
        "enable_load_scaling": True,
        # Its throughput loop (predictive, from the frontend's metrics in Prometheus) runs
        # for the SLA target only; the others react to the workers' forward-pass metrics.
        "enable_throughput_scaling": target.reads_prometheus,
        # No profiling sweep before deployment: the planner starts from its own estimates
        # and tunes them on the workers' live forward-pass metrics (--publish-metrics).
        "pre_deployment_sweeping_mode": "none",
        "load_adjustment_interval_seconds": scale.load_interval_s,
        "max_gpu_budget": scale.max_gpus or topo.hardware.total_gpus,
        "model_name": topo.model.name,
    }
    if target.needs_latency_targets:
        config |= {"ttft_ms": scale.ttft_ms, "itl_ms": scale.itl_ms,
                   "throughput_adjustment_interval_seconds": scale.throughput_interval_s}
    if target.uses_load_thresholds:
        config |= _load_thresholds(topo)
    if environment == VIRTUAL:
        # Off Kubernetes the planner runs beside other graphs: its dashboard binds every
        # interface (live_dashboard.py: 0.0.0.0) and its control API a fixed port (9086),
        # so both stay off; no periodic HTML reports in the working directory. The pools'
        # ceilings reach it as a plugin of its own pipeline (planner_ceilings.py), which
        # runs where dis-serve is installed: not in NVIDIA's planner image.
        config |= {"live_dashboard_port": 0, "control_api_port": 0,
                   "report_interval_hours": None}
        ceilings = _ceilings(topo)
        if any(c is not None for c in ceilings.values()):
            config["plugin_registration"] = {"in_process_plugins": [plugin_entry(**ceilings)]}
    return config | _pool_bounds(topo)


def _ceilings(topo: Topology) -> dict[str, int | None]:
    """The planner's components' ceilings: prefill, and decode (an aggregated pool is its
    decode component)."""
    if topo.mode is Mode.AGG:
        return {"prefill": None, "decode": topo.max_workers(PoolRole.AGG)}
    return {"prefill": topo.max_workers(PoolRole.PREFILL),
            "decode": topo.max_workers(PoolRole.DECODE)}


def _load_thresholds(topo: Topology) -> dict[str, Any]:
    scale = topo.autoscale
    assert scale is not None
    load = scale.load
    prefill = topo.pools.prefill or topo.pools.agg
    assert prefill is not None
    up = load.prefill_queue_tokens_up
    return {"prefill_scale_up_queue_tokens": prefill.max_num_tokens if up is None else up,
            "prefill_scale_down_queue_tokens": load.prefill_queue_tokens_down,
            "decode_scale_up_kv_rate": load.decode_kv_percent_up,
            "decode_scale_down_kv_rate": load.decode_kv_percent_down}


def _pool_bounds(topo: Topology) -> dict[str, Any]:
    """Each pool's GPUs per worker and floor (its min_workers); the ceilings are dis-serve's
    to keep (Dynamo 1.6.1's planner bounds the total only)."""
    if topo.mode is Mode.AGG:
        pool = topo.pools.agg
        assert pool is not None
        return {"decode_engine_num_gpu": pool.tensor_parallel,
                "min_endpoint": pool.min_workers}
    bounds: dict[str, Any] = {}
    for role in (PoolRole.PREFILL, PoolRole.DECODE):
        pool = topo.pools.get(role)
        assert pool is not None
        bounds[f"{role.value}_engine_num_gpu"] = pool.tensor_parallel
        bounds[f"{role.value}_min_endpoint"] = pool.min_workers
    return bounds
