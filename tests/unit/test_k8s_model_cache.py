"""The Kubernetes model cache: one ReadWriteMany claim, filled once by a download Job."""

from __future__ import annotations

import shlex

import yaml

from conftest import GRAPHS, assert_one_line_error, validate_manifest, validate_pod_template
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.kubernetes import model_cache
from dis_serve.topology import Topology

DISAGG_70B = GRAPHS / "llama70b-h100-disagg.yaml"


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _topology(graph=DISAGG_70B, model=None, **kubernetes) -> Topology:
    data = yaml.safe_load(graph.read_text())
    data.setdefault("kubernetes", {}).update(kubernetes)
    data["model"].update(model or {})
    return Topology.model_validate(data)


def _frontend(topo: Topology) -> dict:
    from dis_serve.placements.kubernetes.manifests import render_dgd

    return next(c for c in render_dgd(topo)["spec"]["components"] if c["type"] == "frontend")


def test_claim_and_job_are_valid_kubernetes_objects():
    topo = load_model_file(Topology, DISAGG_70B)
    validate_manifest(model_cache.render_claim(topo))
    validate_manifest(model_cache.render_download_job(topo))


def test_the_claim_is_shared_by_every_node_and_sized_from_the_checkpoint():
    claim = model_cache.render_claim(_topology(model_cache={"storage_class": "fast-rwx"}))
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "fast-rwx"
    # 72.8 GB of FP8 weights (16-bit embeddings and output head) and side files (67.8 GiB),
    # plus a quarter, in 10Gi steps.
    assert claim["spec"]["resources"]["requests"]["storage"] == "90Gi"


def test_the_job_downloads_the_checkpoint_the_workers_load_at_the_pinned_revision():
    topo = _topology(model={"revision": COMMIT})
    job = model_cache.render_download_job(topo)
    container = job["spec"]["template"]["spec"]["containers"][0]
    command = container["command"][2]
    assert shlex.join(["hf", "download", topo.model.id, "--revision", COMMIT]) in command
    assert command.endswith(shlex.join(["touch", model_cache.marker_path(topo)]))
    assert {"name": "HF_HOME", "value": model_cache.HF_HOME} in container["env"]
    # Optional: a model that is not gated downloads without a token.
    assert container["envFrom"] == [{"secretRef": {"name": "hf-token-secret", "optional": True}}]
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


def test_the_revision_defaults_to_main_and_validate_warns_about_it(run_cli):
    topo = load_model_file(Topology, DISAGG_70B)
    assert topo.model.revision == "main"
    assert "--revision main" in model_cache.render_download_job(topo)["spec"]["template"][
        "spec"]["containers"][0]["command"][2]
    result = run_cli("validate", DISAGG_70B)
    assert result.exit_code == 0
    assert "warning: model.revision is 'main'" in result.stdout


def test_a_pinned_commit_draws_no_warning():
    assert model_cache.unpinned_revision_warning(_topology(model={"revision": COMMIT})) is None


def test_the_old_model_cache_revision_key_names_its_new_home(tmp_path, run_cli):
    data = yaml.safe_load(DISAGG_70B.read_text())
    data.setdefault("kubernetes", {})["model_cache"] = {"revision": COMMIT}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_cli("validate", path)
    assert result.exit_code == 2
    assert "moved to model.revision" in result.stderr


def test_workers_load_a_pinned_commit_from_its_snapshot_directory():
    # Offline, the hub resolves an id through refs/<revision>; a commit download writes none.
    topo = _topology(model={"revision": COMMIT})
    assert model_cache.model_path(topo) == (
        f"{model_cache.HF_HOME}/hub/models--nvidia--Llama-3.1-70B-Instruct-FP8/snapshots/{COMMIT}")
    assert model_cache.model_path(_topology()) == topo.model.id  # main: refs/main exists


def test_the_job_downloads_with_hf_transfer_installed_and_hf_xet_at_full_speed():
    container = model_cache.render_download_job(load_model_file(Topology, DISAGG_70B))[
        "spec"]["template"]["spec"]["containers"][0]
    command = container["command"][2]
    install = shlex.join(["python3", "-m", "pip", "install", "--quiet", "--no-cache-dir",
                          "--target", model_cache.HF_TRANSFER_DIR, model_cache.HF_TRANSFER])
    assert f"if {install}; then export PYTHONPATH=" in command
    assert "HF_HUB_ENABLE_HF_TRANSFER=1" in command
    assert command.index(install) < command.index("hf download")
    assert {"name": "HF_XET_HIGH_PERFORMANCE", "value": "1"} in container["env"]


def test_the_frontend_mounts_the_cache_read_only_offline_at_the_workers_path():
    topo = load_model_file(Topology, DISAGG_70B)
    frontend = _frontend(topo)["podTemplate"]["spec"]
    main = frontend["containers"][0]
    assert {"name": model_cache.VOLUME, "mountPath": model_cache.CACHE_MOUNT,
            "readOnly": True} in main["volumeMounts"]
    assert model_cache.cache_volume(topo) in frontend["volumes"]
    assert {"name": "HF_HOME", "value": model_cache.HF_HOME} in main["env"]
    assert {"name": "HF_HUB_OFFLINE", "value": "1"} in main["env"]
    validate_pod_template({"spec": frontend})


def test_the_frontend_waits_for_the_download_job_like_the_workers():
    topo = load_model_file(Topology, DISAGG_70B)
    assert _frontend(topo)["podTemplate"]["spec"]["initContainers"] == [
        model_cache.wait_for_cache(topo)]
    existing = _topology(model_cache={"existing": True, "pvc": "models"})
    assert "initContainers" not in _frontend(existing)["podTemplate"]["spec"]


def test_the_download_script_is_valid_sh():
    import subprocess

    for graph in (DISAGG_70B, GRAPHS / "demo.yaml"):
        script = model_cache.render_download_job(load_model_file(Topology, graph))[
            "spec"]["template"]["spec"]["containers"][0]["command"][2]
        assert subprocess.run(["sh", "-n", "-c", script], check=False).returncode == 0


LLAMA_8B = GRAPHS / "llama8b-8gpu-disagg.yaml"


def _hf_download_args(command: str) -> dict:
    """The Job's `hf download` line as huggingface_hub's own CLI parses it."""
    from huggingface_hub.cli.hf import app

    words = shlex.split(command[command.index("hf download"):].split(" && ")[0])
    context = app.make_context("hf", words[1:2], resilient_parsing=True)
    download = app.get_command(context, "download").materialize()
    return download.make_context("download", words[2:]).params


def test_the_job_leaves_out_the_copies_nvidias_recipes_leave_out():
    from huggingface_hub.utils import filter_repo_objects

    topo = load_model_file(Topology, LLAMA_8B)
    command = model_cache.render_download_job(topo)["spec"]["template"]["spec"][
        "containers"][0]["command"][2]
    args = _hf_download_args(command)
    assert args["repo_id"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert args["exclude"] == ("original/*", "metal/*")
    # What the hub's own filter then keeps of the repository's layout.
    files = ["config.json", "model-00001-of-00004.safetensors", "tokenizer.json",
             "original/consolidated.00.pth", "original/tokenizer.model", "metal/model.bin"]
    kept = list(filter_repo_objects(files, ignore_patterns=list(args["exclude"])))
    assert kept == ["config.json", "model-00001-of-00004.safetensors", "tokenizer.json"]


def test_the_8b_claim_holds_its_download_and_validate_says_so(run_cli):
    topo = load_model_file(Topology, LLAMA_8B)
    assert model_cache.claim_size(topo) == "20Gi"
    assert model_cache.download_gb(topo) < 20 * 2**30 / 1e9
    result = run_cli("validate", LLAMA_8B)
    assert result.exit_code == 0
    assert ("kubernetes model cache: claim llama8b-disagg-model-cache of 20Gi (21.5 GB) holds "
            "the 16.2 GB of meta-llama/Llama-3.1-8B-Instruct (without original/*, metal/*)"
            in result.stdout)


def test_a_claim_too_small_for_the_download_is_refused_in_one_line(tmp_path, run_cli):
    data = yaml.safe_load(LLAMA_8B.read_text())
    data["kubernetes"] = {"model_cache": {"size": "15Gi"}}
    path = tmp_path / "graph.yaml"
    path.write_text(yaml.safe_dump(data))
    for command in (("validate", path), ("render", path, "--target", "k8s", "--out",
                                         tmp_path / "out")):
        result = run_cli(*command)
        # 16.2 GB is 15.1 GiB, and a quarter more rounds up to 19Gi.
        assert "ok " not in result.stdout
        assert_one_line_error(result, str(path), "kubernetes.model_cache.size 15Gi",
                              "at least 19Gi")
    assert not (tmp_path / "out").exists()


def test_the_download_keeps_hf_xets_chunk_cache_off_the_claim():
    container = model_cache.render_download_job(load_model_file(Topology, LLAMA_8B))[
        "spec"]["template"]["spec"]["containers"][0]
    assert {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"} in container["env"]
