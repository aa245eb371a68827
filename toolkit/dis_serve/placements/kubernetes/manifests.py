"""Topology -> Kubernetes: a DynamoGraphDeployment (nvidia.com/v1beta1) for Dynamo's operator,
and what it needs around it: the model-cache claim and its download Job, the ConfigMap
holding the TensorRT-LLM engine configs, a NetworkPolicy around the workers and, when asked,
a public Service for the frontend.

The shape follows the DGD templates Dynamo 1.6.1 ships (dynamo/profiler/templates/dgd/) and
NVIDIA's v1beta1 examples (examples/backends/trtllm/deploy/v1beta1/): `spec.components`, each
with a `type` (frontend | prefill | decode | worker | planner), `replicas`,
`sharedMemorySize` and a pod template whose container is named `main`. Pure: returns Python
objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...engines import engine_for
from ...launch.startup_budget import worker_startup_budget_s
from ...render.dynamo_argv import FRONTEND_MODULE, TargetParams, frontend_args, worker_args
from ...render.engine_config import dump_engine_config, engine_config_name, render_engine_configs
from ...render.model_ready import model_ready_path
from ...topology import PoolRole, Topology
from .availability import (
    frontend_anti_affinity,
    frontend_replicas,
    render_frontend_disruption_budget,
)
from .certificates import render_certificates
from .model_cache import (
    cache_mount,
    cache_volume,
    claim_name,
    marker_path,
    model_path,
    offline_env,
    render_claim,
    render_download_job,
    wait_for_cache,
)
from .monitor import metrics_opt_out
from .network import render_network_policy, render_public_service
from .planner import planner_component
from .pod import (
    SYSTEM_PORT,
    WORKER_GRACE_S,
    container_security_context,
    dynamo_namespace,
    frontend_probes,
    frontend_resources,
    image_ref,
    labels,
    memlock_init_container,
    pod_security_context,
    rdma_env,
    uses_rdma,
    worker_probes,
    worker_resources,
    worker_scheduling,
)
from .secrets import SECRETS_FILE, uses_own_secrets
from .tls import (
    client_secret,
    frontend_probe_action,
    frontend_routed_check,
    frontend_tls_files,
    planes_env,
    planes_tls,
    secret_commands,
    tls_on,
    tls_volumes,
)

HTTP_PORT = 8000
ENGINE_CONFIG_MOUNT = "/etc/dis-serve/engine"
ROUTER_POLICY_MOUNT = "/etc/dis-serve/router"


def config_map_name(topo: Topology) -> str:
    return f"{topo.name}-engine-configs"


def router_policy_map_name(topo: Topology) -> str:
    return f"{topo.name}-router-policy"


def target_params(topo: Topology) -> TargetParams:
    """In the cluster the frontend serves the Service, so it binds all interfaces; the
    operator supplies the namespace and the discovery endpoints; workers load the model from
    the model cache (by id, or a pinned commit's snapshot directory) and read their engine
    configs (and the frontend its router policy) from ConfigMaps; the frontend serves HTTPS
    from its mounted Secret (tls.py)."""
    policy = f"{ROUTER_POLICY_MOUNT}/policy.yaml" if topo.router.policy_config else None
    return TargetParams(namespace=None, http_host="0.0.0.0", http_port=HTTP_PORT,  # noqa: S104
                        model_path=model_path(topo), engine_config_dir=ENGINE_CONFIG_MOUNT,
                        router_policy_config=policy, frontend_tls=frontend_tls_files(topo),
                        replica_sync=frontend_replicas(topo) > 1)


def _frontend_component(topo: Topology) -> dict[str, Any]:
    target = target_params(topo)
    ready_path = model_ready_path(topo.model.name)
    # The model cache at the workers' own path: the frontend reads the tokenizer and config
    # files where each worker registered them (model_cache.py says why).
    container: dict[str, Any] = {
        "name": "main", "image": image_ref(topo),
        "command": [target.python], "args": ["-m", FRONTEND_MODULE, *frontend_args(topo, target)],
        "env": [*offline_env(), *planes_env(topo)],
        "ports": [{"name": "http", "containerPort": HTTP_PORT}],
        **frontend_probes("http", ready_path,
                          lambda path: frontend_probe_action(topo, path, HTTP_PORT, "http"),
                          frontend_routed_check(topo, ready_path, HTTP_PORT),
                          worker_startup_budget_s(topo)),
        "resources": frontend_resources(topo),
        "securityContext": container_security_context(topo, rdma=False),
        "volumeMounts": [cache_mount(read_only=True)],
    }
    pod_spec: dict[str, Any] = {"securityContext": pod_security_context(topo),
                                "containers": [container], "volumes": [cache_volume(topo)]}
    mounts, volumes = tls_volumes(topo, frontend=True)
    container["volumeMounts"] += mounts
    pod_spec["volumes"] += volumes
    if (wait := wait_for_cache(topo)) is not None:
        pod_spec["initContainers"] = [wait]
    if (spread := frontend_anti_affinity(topo)) is not None:
        pod_spec["affinity"] = spread
    if topo.router.policy_config:
        # The policy file lives on the user's machine: it travels as a ConfigMap the user
        # creates from it (`render` prints the command), mounted where the flag points.
        container["volumeMounts"].append({"name": "router-policy",
                                          "mountPath": ROUTER_POLICY_MOUNT, "readOnly": True})
        pod_spec["volumes"].append({"name": "router-policy",
                                    "configMap": {"name": router_policy_map_name(topo)}})
    return {"name": "Frontend", "type": "frontend", "replicas": frontend_replicas(topo),
            "podTemplate": {"spec": pod_spec}}


def _worker_pod(topo: Topology, role: PoolRole) -> tuple[dict[str, Any], dict[str, Any]]:
    """The worker pod without its command: (pod spec, its `main` container)."""
    container: dict[str, Any] = {
        "name": "main", "image": image_ref(topo), "workingDir": "/workspace",
        # The engine's environment, as on every target, then the pod's own.
        "env": [*({"name": k, "value": v} for k, v in engine_for(topo.backend).worker_env.items()),
                {"name": "DYN_SYSTEM_PORT", "value": str(SYSTEM_PORT)},
                # Deprecated, and still read by 1.6.1: without it a mocker worker's /health
                # stayed "notready" for 20 s with its endpoints ready (its readiness probe
                # would never pass); with it "ready" in 0.2 s (measured 2026-12-02; the
                # worker test in tests/integration/test_k8s_request_plane.py runs with it).
                {"name": "DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS", "value": '["generate"]'},
                *offline_env(), *rdma_env(topo), *planes_env(topo)],
        "ports": [{"name": "system", "containerPort": SYSTEM_PORT}],
        **worker_probes(topo),
        "resources": worker_resources(topo, role),
        "securityContext": container_security_context(topo, rdma=uses_rdma(topo)),
        "volumeMounts": [cache_mount()],
    }
    pod_spec: dict[str, Any] = {
        "securityContext": pod_security_context(topo),
        "terminationGracePeriodSeconds": WORKER_GRACE_S,
        **worker_scheduling(topo),
        "containers": [container],
        "volumes": [cache_volume(topo)],
    }
    mounts, volumes = tls_volumes(topo, frontend=False)
    container["volumeMounts"] += mounts
    pod_spec["volumes"] += volumes
    init = [memlock_init_container(topo), wait_for_cache(topo)]
    if init := [container for container in init if container is not None]:
        pod_spec["initContainers"] = init
    if engine_for(topo.backend).uses_engine_config:
        container["volumeMounts"].append({"name": "engine-configs",
                                          "mountPath": ENGINE_CONFIG_MOUNT, "readOnly": True})
        pod_spec["volumes"].append({"name": "engine-configs",
                                    "configMap": {"name": config_map_name(topo)}})
    return pod_spec, container


def _worker_component(topo: Topology, role: PoolRole) -> dict[str, Any]:
    pool = topo.pools.get(role)
    assert pool is not None
    target = target_params(topo)
    engine = engine_for(topo.backend)
    pod_spec, container = _worker_pod(topo, role)
    container["command"] = [target.python, "-m", engine.module_in_image]
    container["args"] = worker_args(topo, role, target)
    return {"name": role.k8s_component_name(engine.k8s_component_prefix),
            "type": role.k8s_component_type,
            "replicas": pool.workers,
            # The operator mounts /dev/shm itself (and drops a user volume there); NCCL
            # between a worker's TP ranks needs more than its 8Gi default.
            "sharedMemorySize": topo.kubernetes.shared_memory,
            "podTemplate": {"spec": pod_spec}}


def render_dgd(topo: Topology) -> dict[str, Any]:
    """The graph for Dynamo's operator. It and every pod template carry the metrics opt-out
    (k8s_monitor.py): the graph's own PodMonitors are its pods' only scrapers."""
    components = [_frontend_component(topo)]
    components += [_worker_component(topo, role) for role, _ in topo.active_pools()]
    if topo.autoscale is not None:
        components.append(planner_component(topo))
    for component in components:
        component["podTemplate"] = {"metadata": {"annotations": metrics_opt_out()},
                                    **component["podTemplate"]}
    spec: dict[str, Any] = {"components": components}
    if (framework := engine_for(topo.backend).dgd_backend_framework) is not None:
        spec = {"backendFramework": framework, **spec}
    return {
        "apiVersion": "nvidia.com/v1beta1",
        "kind": "DynamoGraphDeployment",
        "metadata": {"name": topo.name, "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo), "annotations": metrics_opt_out()},
        "spec": spec,
    }


def render_config_map(topo: Topology) -> dict[str, Any] | None:
    if not engine_for(topo.backend).uses_engine_config:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": config_map_name(topo), "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "data": {engine_config_name(role): dump_engine_config(config)
                 for role, config in render_engine_configs(topo).items()},
    }


def render_namespace(topo: Topology) -> dict[str, Any] | None:
    """The graph's namespace, so that applying the directory needs nothing made first
    (`default` always exists)."""
    namespace = topo.kubernetes.namespace
    if namespace == "default":
        return None
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}


def render_manifests(topo: Topology) -> list[dict[str, Any]]:
    """In apply order: the namespace first, then what the DGD's pods mount or wait for, then
    the DGD."""
    docs = [render_namespace(topo), render_claim(topo), render_download_job(topo),
            render_config_map(topo), *render_certificates(topo), render_network_policy(topo),
            render_public_service(topo), render_frontend_disruption_budget(topo),
            render_dgd(topo)]
    return [doc for doc in docs if doc is not None]


def operator_notes(topo: Topology) -> list[str]:
    """What Dynamo's operator adds to or overrides in these manifests, said where a reader
    of the manifest looks for it (the header of the rendered file)."""
    shm = topo.kubernetes.shared_memory
    notes = [
        f"Dynamo namespace: the operator names it after the Kubernetes namespace and the "
        f"DGD name, {dynamo_namespace(topo)}, and injects it (DYN_NAMESPACE) into every pod; "
        "no component is given --namespace.",
        f"/dev/shm: the operator mounts its own tmpfs of each component's sharedMemorySize "
        f"(workers: {shm}; frontend and planner: its 8Gi default) and drops any volume a "
        "pod template mounts there.",
        "env: the operator adds DYN_NAMESPACE, DYN_PARENT_DGD_K8S_NAME, its platform's "
        "discovery backend, NATS (and etcd) endpoints and the system port; a variable set "
        "here with the same name wins, and none of those is set here.",
        "probes: the ones set here replace the operator's defaults (its worker startup "
        "probe allows 2 hours).",
        "Service: the operator gives the frontend a ClusterIP Service of its own, over its "
        f"{frontend_replicas(topo)} replicas (each on its own node; a PodDisruptionBudget "
        "keeps a drain from taking more than one at a time).",
    ]
    notes.append(f"platform: {platform_note(topo)}")
    if uses_own_secrets(topo):
        notes.append(f"certificates: the Secrets the pods mount are in {Path(SECRETS_FILE).name} "
                     "beside "
                     "this file (keys; `render` keeps them while they are valid), applied "
                     "with the directory.")
    if render_download_job(topo) is not None:
        notes.append(f"model cache: the frontend and the workers wait (init container) "
                     f"until the Job fills claim "
                     f"{claim_name(topo)} and writes {marker_path(topo)}; they run offline. "
                     "A Job's pod template cannot change: delete the Job before applying a "
                     "new model or revision.")
    if render_namespace(topo) is not None:
        notes.append(f"namespace: {topo.kubernetes.namespace} is applied first; `kubectl "
                     "delete -f` of this file deletes it and everything in it, so delete the "
                     "graph by name (kubectl delete dynamographdeployment "
                     f"{topo.name} -n {topo.kubernetes.namespace}) where it is shared.")
    return notes


def platform_note(topo: Topology) -> str:
    """Which Dynamo platform the pods are made for, and what its NATS and etcd must be."""
    request_plane = ("the request plane between the graph's pods is mutual TLS with the pods' "
                     f"certificate (Secret {client_secret(topo)}); " if tls_on(topo) else "")
    if not planes_tls(topo):
        return ("discovery, NATS and etcd as Dynamo's operator injects them; "
                + request_plane + "the platform's NATS (and etcd, where its discovery uses "
                "etcd) must not require TLS, as Dynamo's platform chart installs them "
                "(nats.config.nats.tls.enabled: false, discoveryBackend: kubernetes, no "
                "etcd); set kubernetes.tls.planes: true for one whose NATS and etcd do.")
    kube = topo.kubernetes.tls
    where = ("at kubernetes.tls.etcd_endpoints / nats_server"
             if kube.etcd_endpoints or kube.nats_server else
             "at the endpoints the operator injects (https:// for etcd, tls:// for NATS; "
             "else set kubernetes.tls.etcd_endpoints and nats_server)")
    return ("discovery as Dynamo's operator injects it; " + request_plane
            + "every pod also presents that certificate to the platform's etcd and NATS, "
            f"which must require TLS with client certificates {where}; set "
            "kubernetes.tls.planes: false for Dynamo's default platform, whose NATS has no "
            "TLS.")


def apply_warnings(topo: Topology) -> list[str]:
    """What to fix in the topology before the manifest can serve in a cluster."""
    from ...hardware.catalog import KNOWN_MODELS

    if topo.model.id == KNOWN_MODELS["dis-serve-tiny"].hf_id:
        return [f"{topo.model.id} is dis-serve's local tokenizer-only card, which a cluster "
                "cannot download; set model.id to a real Hugging Face id before applying the "
                "manifest"]
    return []


def apply_prerequisites(topo: Topology) -> list[str]:
    """What `kubectl apply -f` of the rendered directory cannot make itself, as commands."""
    kube = topo.kubernetes
    namespace = f"-n {kube.namespace}"
    steps = []
    if not kube.model_cache.existing and topo.backend.needs_gpu:
        steps.append(f"kubectl create secret generic {kube.model_cache.hf_token_secret} "
                     f"{namespace} --from-literal=HF_TOKEN=<your Hugging Face token> (for a "
                     "gated model such as Meta's Llama: the download Job runs without it)")
    steps += secret_commands(topo)
    if topo.router.policy_config:
        steps.append(f"kubectl create configmap {router_policy_map_name(topo)} {namespace} "
                     f"--from-file=policy.yaml={topo.router.policy_config}")
    return steps
