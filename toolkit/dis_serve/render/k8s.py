"""Topology -> Kubernetes: a DynamoGraphDeployment (nvidia.com/v1beta1) for Dynamo's operator,
plus the ConfigMap holding the TensorRT-LLM engine configs it mounts.

The shape follows the DGD templates Dynamo 1.6.1 ships (dynamo/profiler/templates/dgd/):
`spec.components`, each with a `type` (frontend | prefill | decode | worker), `replicas` and a
pod template whose container is named `main`. Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ..topology import Backend, PoolRole, Topology
from .dynamo_argv import FRONTEND_MODULE, TargetParams, frontend_args, worker_args
from .engine_config import dump_engine_config, render_engine_configs

DYNAMO_VERSION = "1.6.1"
IMAGES = {
    Backend.TRTLLM: f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{DYNAMO_VERSION}",
    # No mocker image exists; Dynamo's own mocker template runs it from the planner image.
    Backend.MOCKER: f"nvcr.io/nvidia/ai-dynamo/dynamo-planner:{DYNAMO_VERSION}",
}
SYSTEM_PORT = 9090
HTTP_PORT = 8000
ENGINE_CONFIG_MOUNT = "/etc/dis-serve/engine"
ROUTER_POLICY_MOUNT = "/etc/dis-serve/router"
HF_SECRET = "hf-token-secret"  # noqa: S105 - a Secret's name, not a secret



def config_map_name(topo: Topology) -> str:
    return f"{topo.name}-engine-configs"


def router_policy_map_name(topo: Topology) -> str:
    return f"{topo.name}-router-policy"


def target_params(topo: Topology) -> TargetParams:
    """In the cluster the frontend serves the Service, so it binds all interfaces; the
    operator supplies the namespace and the discovery endpoints; workers load the model by
    id and read their engine configs (and the frontend its router policy) from ConfigMaps."""
    policy = f"{ROUTER_POLICY_MOUNT}/policy.yaml" if topo.router.policy_config else None
    return TargetParams(namespace=None, http_host="0.0.0.0", http_port=HTTP_PORT,  # noqa: S104
                        model_path=topo.model.id, engine_config_dir=ENGINE_CONFIG_MOUNT,
                        router_policy_config=policy)


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {"httpGet": {"path": path, "port": SYSTEM_PORT}, "periodSeconds": period,
            "timeoutSeconds": 5, "failureThreshold": failures}


def _frontend_component(topo: Topology) -> dict[str, Any]:
    target = target_params(topo)
    container: dict[str, Any] = {
        "name": "main", "image": IMAGES[topo.backend],
        "command": [target.python], "args": ["-m", FRONTEND_MODULE, *frontend_args(topo, target)],
        "ports": [{"name": "http", "containerPort": HTTP_PORT}],
    }
    pod_spec: dict[str, Any] = {"containers": [container]}
    if topo.router.policy_config:
        # The policy file lives on the user's machine: it travels as a ConfigMap the user
        # creates from it (`render` prints the command), mounted where the flag points.
        container["volumeMounts"] = [{"name": "router-policy", "mountPath": ROUTER_POLICY_MOUNT,
                                      "readOnly": True}]
        pod_spec["volumes"] = [{"name": "router-policy",
                                "configMap": {"name": router_policy_map_name(topo)}}]
    return {"name": "Frontend", "type": "frontend", "replicas": 1,
            "podTemplate": {"spec": pod_spec}}


def _worker_component(topo: Topology, role: PoolRole) -> dict[str, Any]:
    pool = topo.pools.get(role)
    assert pool is not None
    target = target_params(topo)
    container: dict[str, Any] = {
        "name": "main", "image": IMAGES[topo.backend], "workingDir": "/workspace",
        "envFrom": [{"secretRef": {"name": HF_SECRET}}],
        "env": [{"name": "DYN_SYSTEM_PORT", "value": str(SYSTEM_PORT)},
                {"name": "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", "value": '["generate"]'}],
        "ports": [{"name": "system", "containerPort": SYSTEM_PORT}],
        "livenessProbe": _probe("/live", 10, 3),
        "readinessProbe": _probe("/health", 10, 3),
        # Loading 70B-class weights takes minutes: give startup its own, longer budget.
        "startupProbe": _probe("/health", 10, 90),
    }
    pod_spec: dict[str, Any] = {"containers": [container]}
    if topo.backend is Backend.TRTLLM:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(pool.tensor_parallel)},
                                  "requests": {"nvidia.com/gpu": str(pool.tensor_parallel)}}
        container["volumeMounts"] = [{"name": "engine-configs", "mountPath": ENGINE_CONFIG_MOUNT,
                                      "readOnly": True}]
        pod_spec["volumes"] = [{"name": "engine-configs",
                                "configMap": {"name": config_map_name(topo)}}]
        # NCCL between the TP ranks of one worker needs more shared memory than the default.
        pod_spec["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory",
                                                                 "sizeLimit": "16Gi"}})
        container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    container["command"] = [target.python, "-m", topo.backend.module]
    container["args"] = worker_args(topo, role, target)
    return {"name": role.k8s_component_name(topo.backend), "type": role.k8s_component_type,
            "replicas": pool.workers, "podTemplate": {"spec": pod_spec}}


def render_dgd(topo: Topology) -> dict[str, Any]:
    components = [_frontend_component(topo)]
    components += [_worker_component(topo, role) for role, _ in topo.active_pools()]
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": topo.name,
                     "labels": {"app.kubernetes.io/managed-by": "dis-serve"}},
        "spec": {"components": components},
    }


def render_config_map(topo: Topology) -> dict[str, Any] | None:
    if not topo.backend.uses_engine_config:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(topo),
                     "labels": {"app.kubernetes.io/managed-by": "dis-serve"}},
        "data": {f"{role.value}.yaml": dump_engine_config(config)
                 for role, config in render_engine_configs(topo).items()},
    }


def render_manifests(topo: Topology) -> list[dict[str, Any]]:
    """ConfigMap first, so `kubectl apply -f` creates what the DGD mounts before it."""
    docs = []
    if (config_map := render_config_map(topo)) is not None:
        docs.append(config_map)
    docs.append(render_dgd(topo))
    return docs
