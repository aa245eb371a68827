"""Topology `autoscale` -> Dynamo's SLA planner as a DynamoGraphDeployment component.

The shape follows NVIDIA's examples/backends/trtllm/deploy/v1beta1/disagg_planner.yaml: a
`planner` component running `python3 -m dynamo.planner --config JSON` from the planner image,
targeting TTFT and ITL with both its throughput (predictive) and load (reactive) loops. The
config is a dict of Dynamo 1.6.1's PlannerConfig fields (tests validate it with that model).
Pure: returns Python objects.
"""

from __future__ import annotations

import json
from typing import Any

from ...topology import Mode, PoolRole, Topology
from .pod import (
    PLANNER_IMAGE,
    container_security_context,
    planner_resources,
    pod_security_context,
)
from .tls import planes_env, tls_volumes


def planner_config(topo: Topology) -> dict[str, Any]:
    scale = topo.autoscale
    assert scale is not None
    config: dict[str, Any] = {
        "environment": "kubernetes",
        "backend": topo.backend.value,
        "mode": topo.mode.value,
        "optimization_target": "sla",
        "ttft_ms": scale.ttft_ms,
        "itl_ms": scale.itl_ms,
        "enable_throughput_scaling": True,
        "enable_load_scaling": True,
        # No profiling sweep before deployment: the planner starts from its own estimates
        # and tunes them on the workers' live forward-pass metrics (--publish-metrics).
        "pre_deployment_sweeping_mode": "none",
        "throughput_adjustment_interval_seconds": scale.throughput_interval_s,
        "load_adjustment_interval_seconds": scale.load_interval_s,
        "max_gpu_budget": scale.max_gpus or topo.hardware.total_gpus,
        "model_name": topo.model.name,
    }
    if topo.mode is Mode.AGG:
        pool = topo.pools.agg
        assert pool is not None
        config["decode_engine_num_gpu"] = pool.tensor_parallel
        config["min_endpoint"] = scale.floor(PoolRole.AGG)
        return config
    for role in (PoolRole.PREFILL, PoolRole.DECODE):
        pool = topo.pools.get(role)
        assert pool is not None
        config[f"{role.value}_engine_num_gpu"] = pool.tensor_parallel
        config[f"{role.value}_min_endpoint"] = scale.floor(role)
    return config


def planner_component(topo: Topology) -> dict[str, Any]:
    """The planner reads the graph's state from the platform's etcd and NATS like any Dynamo
    process: it presents the same client certificate (k8s_tls.py)."""
    container: dict[str, Any] = {
        "name": "main", "image": PLANNER_IMAGE,
        "command": ["python3", "-m", "dynamo.planner"],
        "args": ["--config", json.dumps(planner_config(topo), sort_keys=True)],
        "resources": planner_resources(),
        "securityContext": container_security_context(topo, rdma=False),
    }
    spec: dict[str, Any] = {"securityContext": pod_security_context(topo),
                            "containers": [container]}
    if env := planes_env(topo):
        mounts, volumes = tls_volumes(topo, frontend=False)
        container |= {"env": env, "volumeMounts": mounts}
        spec["volumes"] = volumes
    return {"name": "Planner", "type": "planner", "replicas": 1,
            "podTemplate": {"spec": spec}}
