"""What every pod of a rendered Kubernetes graph carries besides its command: the image, its
identity and security context, CPU and memory, GPUs and RDMA, probes, and where it may run.

Pure: returns Python objects that `manifests.py` places into the DynamoGraphDeployment.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...engines import engine_for
from ...engines.base import dynamo_image
from ...launch.startup_budget import worker_startup_budget_s
from ...topology import PoolRole, Topology, quantity_bytes

# Since Dynamo 1.1 the planner has its own image (backend images lack its dependencies).
PLANNER_IMAGE = dynamo_image("dynamo-planner")
SYSTEM_PORT = 9090
PROBE_PERIOD_S = 10
# The frontend's startup probe (its first chat) is looked at more often: a frontend restarted
# is out of its Service until it passes.
FRONTEND_STARTUP_PERIOD_S = 2
# NVIDIA's disagg_planner.yaml gives worker probes 30 s: a worker busy with a full batch can
# answer /health late without being unhealthy.
PROBE_TIMEOUT_S = 30
# Workers finish their in-flight requests when scaled down (NVIDIA's disagg_planner.yaml).
WORKER_GRACE_S = 600
CPUS_PER_GPU = 8
MEMORY_GIB_PER_GPU = 32
FRONTEND_RESOURCES = {"cpu": "4", "memory": "8Gi"}
# Frontend CPU per request, fitted to benchmarks/baselines/frontend-cpu.json
# (benchmarks/frontend_cpu.py: the mocker demo graph, KV router, streaming chat, an open-loop
# load at 2, 5 and 10 requests/s). At the lowest rate, where a request costs the most, it was
# 26.2 ms for 1,008 prompt + 128 completion tokens and 42.4 ms for 3,008 + 500: 18.4 ms per
# request plus 6.8 us per token (tokenising, block hashing for the router, detokenising).
FRONTEND_CPU_S_PER_REQUEST = 0.0184
FRONTEND_CPU_S_PER_TOKEN = 6.8e-6
# Twice the planned mean: arrivals come in bursts, and the measurement was on a quiet graph.
FRONTEND_CPU_HEADROOM = 2.0
FRONTEND_MIN_CPU = 1.0
# A mocker worker simulates its engine on one core and holds a tokenizer.
MOCKER_RESOURCES = {"cpu": "2", "memory": "4Gi"}
PLANNER_RESOURCES = {"cpu": "1", "memory": "4Gi"}
def image_ref(topo: Topology) -> str:
    kube = topo.kubernetes
    image = kube.image or engine_for(topo.backend).image
    return f"{image}@{kube.image_digest}" if kube.image_digest else image


def quantity_gib(quantity: str) -> float:
    return quantity_bytes(quantity) / 2**30


def pod_security_context(topo: Topology) -> dict[str, Any]:
    security = topo.kubernetes.security
    return {"runAsNonRoot": True, "runAsUser": security.run_as_user,
            "runAsGroup": security.run_as_group, "fsGroup": security.fs_group,
            "seccompProfile": {"type": "RuntimeDefault"}}


def container_security_context(topo: Topology, *, rdma: bool) -> dict[str, Any]:
    """No privilege and no capabilities, except what RDMA needs: IPC_LOCK to pin the memory
    it registers with the NIC (or privileged mode where the fabric's plugin asks for it),
    held by root inside the container, since a non-root user's added capabilities are in no
    set that counts (kubernetes/kubernetes#56374), unless `rdma.run_as_root` is off."""
    fabric = topo.kubernetes.rdma
    root = {"runAsUser": 0, "runAsNonRoot": False} if rdma and fabric.run_as_root else {}
    if rdma and fabric.privileged:
        # NVIDIA's provider profiles add SYS_PTRACE for CUDA IPC between ranks.
        return {**root, "privileged": True,
                "capabilities": {"add": ["IPC_LOCK", "SYS_PTRACE"]}}
    capabilities: dict[str, list[str]] = {"drop": ["ALL"]}
    if rdma:
        capabilities["add"] = ["IPC_LOCK"]
    return {**root, "allowPrivilegeEscalation": False, "capabilities": capabilities}


def memlock_init_container(topo: Topology) -> dict[str, Any] | None:
    """Before a TensorRT-LLM worker starts, the check every target runs (shell_words.
    memlock_check), as the worker's own user with its own capabilities: with RDMA a worker
    that cannot lock memory stops here with one line (kubectl logs -c check-memlock), instead
    of failing to register KV-cache buffers later."""
    if not topo.backend.needs_gpu:
        return None
    from ...render.shell_words import memlock_check

    rdma = uses_rdma(topo)
    fix = ("keep kubernetes.rdma.run_as_root on, or raise the locked-memory limit of the "
           "container runtime (containerd: LimitMEMLOCK=infinity)")
    return {"name": "check-memlock", "image": image_ref(topo),
            "command": ["sh", "-c", memlock_check(f"{topo.name} worker", fix, fatal=rdma)],
            "resources": _requests_and_limits({"cpu": "100m", "memory": "64Mi"}),
            "securityContext": container_security_context(topo, rdma=rdma)}


def _requests_and_limits(values: dict[str, str]) -> dict[str, dict[str, str]]:
    # Requests equal limits: the Guaranteed QoS class, the last to be evicted.
    return {"requests": dict(values), "limits": dict(values)}


def frontend_cpu(topo: Topology) -> str:
    """The frontend's CPUs for the graph's planned rate, in half-CPU steps (4 unplanned)."""
    rate = topo.frontend.planned_rate_per_s
    if rate is None:
        return FRONTEND_RESOURCES["cpu"]
    tokens = topo.model.max_input_tokens + topo.model.max_output_tokens
    cores = rate * (FRONTEND_CPU_S_PER_REQUEST + FRONTEND_CPU_S_PER_TOKEN * tokens)
    cores = max(FRONTEND_MIN_CPU, math.ceil(2 * cores * FRONTEND_CPU_HEADROOM) / 2)
    return str(int(cores)) if cores.is_integer() else f"{int(cores * 1000)}m"


def frontend_resources(topo: Topology) -> dict[str, dict[str, str]]:
    own = topo.kubernetes.frontend_resources
    return _requests_and_limits({"cpu": own.cpu or frontend_cpu(topo),
                                 "memory": own.memory or FRONTEND_RESOURCES["memory"]})


def planner_resources() -> dict[str, dict[str, str]]:
    return _requests_and_limits(PLANNER_RESOURCES)


def worker_memory_gib(topo: Topology, role: PoolRole) -> int:
    """Host memory for one worker: MEMORY_GIB_PER_GPU per GPU, and never less than twice its
    weight shard (staged in host memory while loading) plus /dev/shm, which counts against
    the pod's memory limit."""
    pool = topo.pools.get(role)
    assert pool is not None
    fit = topo.memory_fit(role)
    floor = 2 * fit.weights_gib + quantity_gib(topo.kubernetes.shared_memory)
    return math.ceil(max(MEMORY_GIB_PER_GPU * pool.tensor_parallel, floor))


def worker_resources(topo: Topology, role: PoolRole) -> dict[str, dict[str, str]]:
    pool = topo.pools.get(role)
    assert pool is not None
    own = topo.kubernetes.worker_resources
    if not topo.backend.needs_gpu:
        return _requests_and_limits({"cpu": own.cpu or MOCKER_RESOURCES["cpu"],
                                     "memory": own.memory or MOCKER_RESOURCES["memory"]})
    values = {"cpu": own.cpu or str(CPUS_PER_GPU * pool.tensor_parallel),
              "memory": own.memory or f"{worker_memory_gib(topo, role)}Gi",
              "nvidia.com/gpu": str(pool.tensor_parallel)}
    rdma = topo.kubernetes.rdma
    if rdma.resource is not None:
        values[rdma.resource] = str(rdma.resource_count)
    return _requests_and_limits(values)


def rdma_env(topo: Topology) -> list[dict[str, str]]:
    rdma = topo.kubernetes.rdma
    if not rdma.profile.enabled or rdma.ucx_net_devices is None:
        return []
    return [{"name": "UCX_NET_DEVICES", "value": rdma.ucx_net_devices}]


def uses_rdma(topo: Topology) -> bool:
    return topo.backend.needs_gpu and topo.kubernetes.rdma.profile.enabled


def _probe(action: dict[str, Any], failures: int, timeout: int,
           period: int = PROBE_PERIOD_S) -> dict[str, Any]:
    return {**action, "periodSeconds": period, "timeoutSeconds": timeout,
            "failureThreshold": failures}


def _http_probe(path: str, port: int | str, failures: int, timeout: int) -> dict[str, Any]:
    return _probe({"httpGet": {"path": path, "port": port}}, failures, timeout)


def worker_probes(topo: Topology) -> dict[str, dict[str, Any]]:
    """Liveness and readiness only after the startup probe has passed; the startup probe
    allows the model-size budget of `startup_budget.worker_startup_budget_s`."""
    startup_failures = math.ceil(worker_startup_budget_s(topo) / PROBE_PERIOD_S)
    return {
        "startupProbe": _http_probe("/health", SYSTEM_PORT, startup_failures, PROBE_TIMEOUT_S),
        "livenessProbe": _http_probe("/live", SYSTEM_PORT, 3, PROBE_TIMEOUT_S),
        "readinessProbe": _http_probe("/health", SYSTEM_PORT, 3, PROBE_TIMEOUT_S),
    }


def frontend_probes(port: str, ready_path: str,
                    action: Callable[[str], dict[str, Any]] | None = None,
                    routed: dict[str, Any] | None = None,
                    startup_s: float = 0) -> dict[str, dict[str, Any]]:
    """`ready_path` is the frontend's readiness (render/model_ready.py); `action(path)`
    says how to ask (tls.frontend_probe_action: HTTPS, or a check in the pod); plain HTTP GET
    on `port` without it. `routed` (tls.frontend_routed_check: the ready path, then a
    one-token chat) is its startup probe, for up to `startup_s` (the workers' startup
    budget: the frontend routes once they are up)."""
    ask = action or (lambda path: {"httpGet": {"path": path, "port": port}})
    # Ready once it routes the model: a frontend just started answers /health at once but
    # chat requests with 404 until it has discovered the model, and with 503 until its prefill
    # router is activated, so its Service sends it nothing before. The chat is sent by the
    # startup probe (once per container start), the periodic readiness probe asks the GET.
    # Waiting is not a reason to restart it (that is /live's job).
    probes = {"livenessProbe": _probe(ask("/live"), 3, 5),
              "readinessProbe": _probe(ask(ready_path), 3, 5)}
    if routed is not None:
        failures = math.ceil(startup_s / FRONTEND_STARTUP_PERIOD_S)
        probes["startupProbe"] = _probe(routed, failures, 5, FRONTEND_STARTUP_PERIOD_S)
    return probes


def worker_scheduling(topo: Topology) -> dict[str, Any]:
    kube = topo.kubernetes
    out: dict[str, Any] = {}
    if kube.node_selector:
        out["nodeSelector"] = dict(kube.node_selector)
    if kube.tolerations:
        out["tolerations"] = [t.model_dump(exclude_none=True) for t in kube.tolerations]
    return out


def labels(topo: Topology) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": "dis-serve", "app.kubernetes.io/part-of": topo.name}


def dynamo_namespace(topo: Topology) -> str:
    """The Dynamo namespace the operator gives the graph's pods: the Kubernetes namespace and
    the DGD name joined by a dash (its ComputeDynamoNamespace; our names have no dots for it
    to replace)."""
    return f"{topo.kubernetes.namespace}-{topo.name}"
