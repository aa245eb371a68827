"""The Kubernetes model cache: one ReadWriteMany claim, filled once by a download Job."""

from __future__ import annotations

import shlex

import yaml

from conftest import GRAPHS, validate_manifest, validate_pod_template
from dis_serve.render import model_cache
from dis_serve.topology import Topology
from dis_serve.yaml_input import load_model_file

DISAGG_70B = GRAPHS / "llama70b-h100-disagg.yaml"


def _topology(graph=DISAGG_70B, **kubernetes) -> Topology:
    data = yaml.safe_load(graph.read_text())
    data.setdefault("kubernetes", {}).update(kubernetes)
    return Topology.model_validate(data)


def test_claim_and_job_are_valid_kubernetes_objects():
    topo = load_model_file(Topology, DISAGG_70B)
    validate_manifest(model_cache.render_claim(topo))
    validate_manifest(model_cache.render_download_job(topo))


def test_the_claim_is_shared_by_every_node_and_sized_from_the_checkpoint():
    claim = model_cache.render_claim(_topology(model_cache={"storage_class": "fast-rwx"}))
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "fast-rwx"
    # 70.6 GB of FP8 weights (65.8 GiB) plus a quarter, in 10Gi steps.
    assert claim["spec"]["resources"]["requests"]["storage"] == "90Gi"


def test_the_job_downloads_the_checkpoint_the_workers_load_at_the_pinned_revision():
    topo = _topology(model_cache={"revision": "0123abcd"})
    job = model_cache.render_download_job(topo)
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = container["command"][2]
    assert shlex.join(["hf", "download", topo.model.id, "--revision", "0123abcd"]) in command
    assert command.endswith(shlex.join(["touch", model_cache.marker_path(topo)]))
    assert {"name": "HF_HOME", "value": model_cache.HF_HOME} in container["env"]
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token-secret"}}]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_the_mocker_downloads_only_the_tokenizer_and_config():
    topo = _topology(GRAPHS / "demo.yaml")
    command = model_cache.render_download_job(topo)["spec"]["template"]["spec"][
        "containers"][0]["command"][2]
    assert "--include '*.json'" in command
    assert model_cache.claim_size(topo) == "1Gi"


def test_an_existing_claim_gets_no_claim_no_job_and_no_wait():
    topo = _topology(model_cache={"existing": True, "pvc": "models"})
    assert model_cache.render_claim(topo) is None
    assert model_cache.render_download_job(topo) is None
    assert model_cache.wait_for_cache(topo) is None
    assert model_cache.cache_volume(topo)["persistentVolumeClaim"]["claimName"] == "models"


def test_workers_wait_for_the_jobs_marker_in_a_valid_init_container():
    topo = load_model_file(Topology, DISAGG_70B)
    init = model_cache.wait_for_cache(topo)
    assert shlex.quote(model_cache.marker_path(topo)) in init["command"][2]
    validate_pod_template({"spec": {"initContainers": [init],
                                    "containers": [{"name": "main", "image": "x"}],
                                    "volumes": [model_cache.cache_volume(topo)]}})
