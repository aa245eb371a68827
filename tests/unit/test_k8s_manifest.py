"""The Kubernetes render: a DynamoGraphDeployment Dynamo's own DGD model accepts, pod templates
Kubernetes' own schema accepts, and what a real 48 x H100 cluster needs on first contact."""

from __future__ import annotations

import pytest
import yaml

from conftest import GRAPHS, validate_manifest, validate_pod_template
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.startup_budget import worker_startup_budget_s
from dis_serve.placements.kubernetes.dump import dump_manifests
from dis_serve.placements.kubernetes.manifests import (
    config_map_name,
    operator_notes,
    render_manifests,
)
from dis_serve.topology import Topology

EXAMPLES = sorted(p.name for p in GRAPHS.glob("*.yaml"))
WORKER_TYPES = {"prefill", "decode", "worker"}


def _manifests(graph: str, **kubernetes) -> tuple[Topology, list[dict]]:
    data = yaml.safe_load((GRAPHS / graph).read_text())
    if kubernetes:
        data.setdefault("kubernetes", {}).update(kubernetes)
    topo = Topology.model_validate(data)
    # Through YAML and back, as kubectl will read it.
    return topo, list(yaml.safe_load_all(dump_manifests(render_manifests(topo))))


def _dgd(docs: list[dict]) -> dict:
    return next(d for d in docs if d["kind"] == "DynamoGraphDeployment")


def _kind(docs: list[dict], kind: str) -> dict | None:
    return next((d for d in docs if d["kind"] == kind), None)


def _components(docs: list[dict]) -> dict[str, dict]:
    return {c["type"]: c for c in _dgd(docs)["spec"]["components"]}


def _workers(docs: list[dict]) -> list[dict]:
    return [c for c in _dgd(docs)["spec"]["components"] if c["type"] in WORKER_TYPES]


def _main(component: dict) -> dict:
    return component["podTemplate"]["spec"]["containers"][0]


def _env(container: dict) -> dict[str, str]:
    # Secret-backed variables (valueFrom) read as None.
    return {e["name"]: e.get("value") for e in container.get("env", [])}


@pytest.mark.parametrize("graph", EXAMPLES)
def test_dgd_validates_against_dynamos_own_dgd_model(graph, dynamo_schemas):
    _, docs = _manifests(graph)
    parsed = dynamo_schemas.dgd.model_validate(_dgd(docs))
    assert next(c.component_type for c in parsed.spec.components) == "frontend"
    assert all(c.podTemplate.spec.containers[0].name == "main" for c in parsed.spec.components)
    assert parsed.apiVersion == "nvidia.com/v1beta1"
    assert parsed.kind == "DynamoGraphDeployment"


@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_pod_template_and_object_is_valid_against_kubernetes_own_schema(graph):
    _, docs = _manifests(graph)
    for component in _dgd(docs)["spec"]["components"]:
        validate_pod_template(component["podTemplate"])
    for doc in docs:
        if doc["kind"] != "DynamoGraphDeployment":
            validate_manifest(doc)


@pytest.mark.parametrize("graph", EXAMPLES)
def test_no_worker_pod_can_download_weights_to_its_container_disk(graph):
    _, docs = _manifests(graph)
    claim = _kind(docs, "PersistentVolumeClaim")["metadata"]["name"]
    for component in _workers(docs):
        spec = component["podTemplate"]["spec"]
        container = _main(component)
        env = _env(container)
        assert env["HF_HUB_OFFLINE"] == "1" and env["TRANSFORMERS_OFFLINE"] == "1"
        # HF_HOME lies on the shared claim, not on the container's disk.
        volumes = {v["name"]: v for v in spec["volumes"]}
        mount = next(m for m in container["volumeMounts"]
                     if env["HF_HOME"].startswith(m["mountPath"] + "/"))
        assert volumes[mount["name"]]["persistentVolumeClaim"]["claimName"] == claim
        # No token either: only the download Job reads the Hugging Face secret.
        assert "envFrom" not in container


def test_an_existing_claim_is_mounted_and_nothing_is_downloaded():
    _, docs = _manifests("llama70b-h100-disagg.yaml",
                         model_cache={"existing": True, "pvc": "models"})
    assert _kind(docs, "Job") is None and _kind(docs, "PersistentVolumeClaim") is None
    for component in _workers(docs):
        spec = component["podTemplate"]["spec"]
        # Nothing waits for a download (the memory-lock check still runs first).
        assert [c["name"] for c in spec["initContainers"]] == ["check-memlock"]
        assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "models"}} \
            in spec["volumes"]


def test_disagg_components_carry_replicas_and_resources_from_the_pools():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    components = _components(docs)
    assert set(components) == {"frontend", "prefill", "decode"}
    for role in ("prefill", "decode"):
        pool = topo.pools.get(role)
        container = _main(components[role])
        assert components[role]["replicas"] == pool.workers
        for side in ("requests", "limits"):
            resources = container["resources"][side]
            assert resources["nvidia.com/gpu"] == str(pool.tensor_parallel)
            assert resources["cpu"] == str(8 * pool.tensor_parallel)
            assert resources["memory"] == f"{32 * pool.tensor_parallel}Gi"
        assert container["command"] == ["python3", "-m", "dynamo.trtllm"]
        assert ["--disaggregation-mode", role] == container["args"][
            container["args"].index("--disaggregation-mode"):][:2]


@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_container_has_cpu_and_memory_requests_equal_to_limits(graph):
    _, docs = _manifests(graph)
    for component in _dgd(docs)["spec"]["components"]:
        spec = component["podTemplate"]["spec"]
        for container in spec["containers"] + spec.get("initContainers", []):
            resources = container["resources"]
            assert {"cpu", "memory"} <= set(resources["requests"]), component["name"]
            assert resources["requests"] == resources["limits"], component["name"]


@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_pod_runs_as_non_root_without_privilege_or_capabilities_but_rdma_workers(graph):
    topo, docs = _manifests(graph)
    for component in _dgd(docs)["spec"]["components"]:
        spec = component["podTemplate"]["spec"]
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert spec["securityContext"]["runAsUser"] == 1000
        for container in spec["containers"] + spec.get("initContainers", []):
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False
            assert security["capabilities"]["drop"] == ["ALL"]
            # An RDMA worker (and its memlock check) is root in its container, holding
            # IPC_LOCK and nothing else: a non-root user cannot use it (kubernetes#56374).
            rdma = component["type"] in WORKER_TYPES and container["name"] in (
                "main", "check-memlock") and topo.kubernetes.rdma.profile.enabled
            assert security["capabilities"].get("add", []) == (["IPC_LOCK"] if rdma else [])
            assert security.get("runAsUser") == (0 if rdma else None)
            assert security.get("runAsNonRoot") is (False if rdma else None)


def test_rdma_workers_request_the_fabric_and_may_pin_memory():
    _, docs = _manifests("llama70b-h100-disagg.yaml",
                         rdma={"profile": "roce", "resource_name": "rdma/roce_a",
                               "ucx_net_devices": "mlx5_0:1"})
    for component in _workers(docs):
        container = _main(component)
        assert container["resources"]["limits"]["rdma/roce_a"] == "1"
        assert container["securityContext"]["capabilities"]["add"] == ["IPC_LOCK"]
        assert _env(container)["UCX_NET_DEVICES"] == "mlx5_0:1"


def _memlock_check(component: dict) -> dict | None:
    return next((c for c in component["podTemplate"]["spec"].get("initContainers", [])
                 if c["name"] == "check-memlock"), None)


def test_every_gpu_worker_first_checks_it_can_lock_memory_as_itself():
    from dis_serve.render.shell_words import memlock_check

    _, docs = _manifests("llama70b-h100-disagg.yaml")
    for component in _workers(docs):
        check = _memlock_check(component)
        assert check["securityContext"] == _main(component)["securityContext"]
        assert check["image"] == _main(component)["image"]
        # The one check every target runs; fatal with RDMA.
        assert check["command"][2].startswith(memlock_check("x", "y", fatal=True).split(
            "then")[0])
        assert check["command"][2].endswith("exit 1; fi")
        # Before the cache wait: a worker that cannot run says so at once.
        names = [c["name"] for c in component["podTemplate"]["spec"]["initContainers"]]
        assert names == ["check-memlock", "wait-for-model-cache"]
    _, plain = _manifests("llama8b-8gpu-disagg.yaml")
    assert all(not _memlock_check(c)["command"][2].endswith("exit 1; fi")
               for c in _workers(plain))
    _, mocker = _manifests("demo.yaml")
    assert all(_memlock_check(c) is None for c in _workers(mocker))


def test_rdma_workers_stay_non_root_when_asked_and_then_rely_on_the_runtimes_limit():
    _, docs = _manifests("llama70b-h100-disagg.yaml",
                         rdma={"profile": "infiniband", "run_as_root": False})
    for component in _workers(docs):
        security = _main(component)["securityContext"]
        assert "runAsUser" not in security and security["capabilities"]["add"] == ["IPC_LOCK"]
        assert _memlock_check(component)["command"][2].endswith("exit 1; fi")


def test_the_infiniband_example_requests_the_ib_device_plugin_slot():
    _, docs = _manifests("llama70b-h100-disagg.yaml")
    for component in _workers(docs):
        assert _main(component)["resources"]["limits"]["rdma/ib"] == "1"


def test_roce_without_a_resource_name_is_refused():
    with pytest.raises(ValueError, match=r"rdma\.resource_name is missing"):
        _manifests("llama70b-h100-disagg.yaml", rdma={"profile": "roce"})


def test_shared_memory_is_the_operators_field_and_no_volume_is_mounted_at_dev_shm():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    assert _dgd(docs)["spec"]["backendFramework"] == "trtllm"
    for component in _dgd(docs)["spec"]["components"]:
        if component["type"] in WORKER_TYPES:
            assert component["sharedMemorySize"] == topo.kubernetes.shared_memory
        mounts = [m["mountPath"] for m in _main(component).get("volumeMounts", [])]
        assert "/dev/shm" not in mounts


@pytest.mark.parametrize("graph", ["llama70b-h100-disagg.yaml", "llama8b-8gpu-disagg.yaml",
                                   "demo.yaml"])
def test_the_startup_probe_allows_the_model_size_budget(graph):
    topo, docs = _manifests(graph)
    for component in _workers(docs):
        probe = _main(component)["startupProbe"]
        assert probe["httpGet"]["path"] == "/health"
        allowed = probe["periodSeconds"] * probe["failureThreshold"]
        assert worker_startup_budget_s(topo) <= allowed < worker_startup_budget_s(topo) + 10


def test_a_70b_worker_gets_more_than_the_old_900_seconds_to_start():
    topo, _ = _manifests("llama70b-h100-disagg.yaml")
    assert worker_startup_budget_s(topo) > 900


def test_workers_probe_health_and_liveness_on_the_system_port():
    _, docs = _manifests("llama70b-h100-disagg.yaml")
    container = _main(_components(docs)["decode"])
    port = int(_env(container)["DYN_SYSTEM_PORT"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": port}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": port}


def test_the_frontend_is_probed_on_its_http_port_over_https():
    _, docs = _manifests("llama70b-h100-disagg.yaml")
    container = _main(_components(docs)["frontend"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/live", "port": "http",
                                                     "scheme": "HTTPS"}
    # Ready (in its Service) only once it can route the model, not when it first answers.
    assert container["readinessProbe"]["httpGet"] == {
        "path": "/v1/models/llama-3.1-70b/ready", "port": "http", "scheme": "HTTPS"}


def test_engine_configs_ship_as_a_config_map_the_workers_mount():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    config_map = _kind(docs, "ConfigMap")
    assert set(config_map["data"]) == {"prefill.yaml", "decode.yaml"}
    prefill = yaml.safe_load(config_map["data"]["prefill.yaml"])
    assert prefill["disable_overlap_scheduler"] is True
    spec = _components(docs)["prefill"]["podTemplate"]["spec"]
    volume = next(v for v in spec["volumes"] if "configMap" in v)
    assert volume["configMap"]["name"] == config_map_name(topo)
    container = spec["containers"][0]
    mount = next(m for m in container["volumeMounts"] if m["name"] == volume["name"])
    args = container["args"]
    assert args[args.index("--extra-engine-args") + 1] == f"{mount['mountPath']}/prefill.yaml"


def test_frontend_runs_the_kv_router_with_the_topologys_migration_limit():
    topo, docs = _manifests("llama70b-h100-disagg.yaml")
    args = _main(_components(docs)["frontend"])["args"]
    assert args[args.index("--router-mode") + 1] == "kv"
    assert args[args.index("--migration-limit") + 1] == str(topo.frontend.migration_limit)


def test_the_mocker_graph_needs_no_config_map_and_no_gpus():
    _, docs = _manifests("demo.yaml")
    assert _kind(docs, "ConfigMap") is None
    assert "backendFramework" not in _dgd(docs)["spec"]
    for component in _dgd(docs)["spec"]["components"]:
        assert "nvidia.com/gpu" not in _main(component)["resources"]["limits"]


def test_only_the_graphs_frontend_planner_and_workers_reach_the_workers():
    topo, docs = _manifests("llama70b-h100-disagg.yaml", metrics_namespaces=["monitoring"])
    policy = _kind(docs, "NetworkPolicy")["spec"]
    graph = {"nvidia.com/dynamo-graph-deployment-name": topo.name}
    assert policy["podSelector"]["matchLabels"] == graph
    assert policy["podSelector"]["matchExpressions"][0]["values"] == \
        ["worker", "prefill", "decode"]
    (rule,) = policy["ingress"]
    pods, namespace = rule["from"]
    assert pods["podSelector"]["matchLabels"] == graph
    assert set(pods["podSelector"]["matchExpressions"][0]["values"]) == \
        {"frontend", "planner", "worker", "prefill", "decode"}
    assert namespace == {"namespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}


def test_nothing_is_public_unless_asked():
    _, docs = _manifests("llama70b-h100-disagg.yaml")
    assert _kind(docs, "Service") is None
    _, docs = _manifests("llama70b-h100-disagg.yaml", service="load-balancer")
    service = _kind(docs, "Service")
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["selector"]["nvidia.com/dynamo-component-type"] == "frontend"


def test_the_planner_runs_only_when_autoscale_is_set_and_then_workers_publish_metrics():
    _, plain = _manifests("llama70b-h100-disagg.yaml")
    _, scaled = _manifests("llama70b-h100-disagg-planner.yaml")
    assert "planner" not in _components(plain)
    assert _components(scaled)["planner"]["replicas"] == 1
    assert all("--publish-metrics" not in _main(c)["args"] for c in _workers(plain))
    assert all("--publish-metrics" in _main(c)["args"] for c in _workers(scaled))


def test_the_manifest_says_what_the_operator_injects_or_overrides():
    topo = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
    text = dump_manifests(render_manifests(topo), operator_notes(topo))
    header = text[:text.index("apiVersion")]
    assert all(line.startswith("#") for line in header.splitlines())
    flat = " ".join(line.lstrip("# ") for line in header.splitlines())
    # The operator's Dynamo namespace is NAMESPACE-NAME (ComputeDynamoNamespace).
    assert "llm-llama70b-disagg" in flat
    assert "/dev/shm" in flat and "sharedMemorySize" in flat
    assert "DYN_NAMESPACE" in flat and "a variable set here with the same name wins" in flat


def test_workers_land_where_the_topology_says_and_run_the_pinned_image():
    digest = "sha256:" + "ab" * 32
    _, docs = _manifests(
        "llama70b-h100-disagg.yaml", image_digest=digest,
        node_selector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        tolerations=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])
    for component in _workers(docs):
        spec = component["podTemplate"]["spec"]
        validate_pod_template(component["podTemplate"])
        assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
        assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists",
                                        "effect": "NoSchedule"}]
        assert _main(component)["image"].endswith("@" + digest)
    assert "nodeSelector" not in _components(docs)["frontend"]["podTemplate"]["spec"]


def test_a_malformed_kubernetes_quantity_is_refused_with_an_example():
    with pytest.raises(ValueError, match="write it like 16Gi"):
        _manifests("llama70b-h100-disagg.yaml", shared_memory="16 GB")


def test_the_frontend_reads_the_router_policy_where_its_config_map_is_mounted():
    from dis_serve.placements.kubernetes.manifests import (
        ROUTER_POLICY_MOUNT,
        router_policy_map_name,
    )

    topo = load_model_file(Topology, GRAPHS / "demo.yaml")
    topo = topo.model_copy(update={"router": topo.router.model_copy(
        update={"policy_config": "/home/me/policy.yaml"})})
    frontend = _components(render_manifests(topo))["frontend"]["podTemplate"]["spec"]
    args = frontend["containers"][0]["args"]
    mounted = args[args.index("--router-policy-config") + 1]
    assert mounted.startswith(ROUTER_POLICY_MOUNT + "/")
    assert {"name": "router-policy", "mountPath": ROUTER_POLICY_MOUNT, "readOnly": True} in \
        frontend["containers"][0]["volumeMounts"]
    assert {"name": "router-policy", "configMap": {"name": router_policy_map_name(topo)}} in \
        frontend["volumes"]
    assert "/home/me" not in " ".join(args)


BUILT_IN_KINDS = {"Namespace", "PersistentVolumeClaim", "Job", "ConfigMap", "Secret",
                  "NetworkPolicy", "Service", "PodDisruptionBudget"}


def _rendered_directory(graph: str, tmp_path) -> list[dict]:
    """What `kubectl apply -f k8s/` reads: every file `render` writes directly in k8s/, in
    the order kubectl reads them."""
    from dis_serve.placements.files import write_rendered

    topo = load_model_file(Topology, GRAPHS / graph)
    write_rendered(topo, "k8s", tmp_path)
    return [doc for path in sorted((tmp_path / "k8s").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def _pod_specs(docs: list[dict]) -> list[dict]:
    specs = [c["podTemplate"]["spec"] for c in _dgd(docs)["spec"]["components"]]
    return specs + [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "Job"]


@pytest.mark.parametrize("graph", EXAMPLES)
def test_applying_the_rendered_directory_needs_nothing_made_by_hand(graph, tmp_path):
    docs = _rendered_directory(graph, tmp_path)
    # Dynamo's platform brings the DGD's CRD; the SLA planner reads Prometheus, so its graph
    # also needs a Prometheus Operator (for its PodMonitors); nothing else is assumed.
    topo = load_model_file(Topology, GRAPHS / graph)
    assumed = BUILT_IN_KINDS | {"DynamoGraphDeployment"} | (
        {"PodMonitor"} if topo.autoscale is not None else set())
    assert {d["kind"] for d in docs} <= assumed
    made = {(d["kind"], d["metadata"]["name"]) for d in docs}
    made |= {("Secret", d["spec"]["secretName"]) for d in docs if d["kind"] == "Certificate"}
    for doc in docs:
        namespace = doc["metadata"].get("namespace")
        assert namespace in (None, "default") or ("Namespace", namespace) in made
    for spec in _pod_specs(docs):
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert ("Secret", volume["secret"]["secretName"]) in made
            if "configMap" in volume:
                assert ("ConfigMap", volume["configMap"]["name"]) in made
            if "persistentVolumeClaim" in volume:
                assert ("PersistentVolumeClaim",
                        volume["persistentVolumeClaim"]["claimName"]) in made
        for container in spec["containers"] + spec.get("initContainers", []):
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                assert ref is None or ("Secret", ref["name"]) in made
            # The Hugging Face token is a credential only its owner has: optional.
            assert all(source["secretRef"].get("optional") for source in
                       container.get("envFrom", []))
