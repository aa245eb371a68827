"""Topology `autoscale` -> Dynamo's planner as a DynamoGraphDeployment component.

The shape follows NVIDIA's examples/backends/trtllm/deploy/v1beta1/disagg_planner.yaml: a
`planner` component running `python3 -m dynamo.planner --config JSON` from the planner image
(the config: planner_config.py, `environment: kubernetes`). Pure: returns Python objects.
"""

from __future__ import annotations

import json
from typing import Any

from ...render.planner_config import planner_config
from ...topology import Topology
from .pod import (
    PLANNER_IMAGE,
    container_security_context,
    planner_resources,
    pod_security_context,
)
from .tls import planes_env, tls_volumes

# Dynamo's planner scales the DGD through the operator.
PLANNER_ENVIRONMENT = "kubernetes"


def planner_component(topo: Topology) -> dict[str, Any]:
    """The planner is a Dynamo process like the others: it holds the pods' certificate for
    the request plane and, on a TLS platform, the platform's etcd and NATS (tls.py)."""
    container: dict[str, Any] = {
        "name": "main", "image": PLANNER_IMAGE,
        "command": ["python3", "-m", "dynamo.planner"],
        "args": ["--config", json.dumps(planner_config(topo, PLANNER_ENVIRONMENT), sort_keys=True)],
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
