"""Topology -> the Kubernetes model cache: one ReadWriteMany claim, filled once by a Job.

NVIDIA's recipes (ai-dynamo/dynamo recipes/llama-3-70b/model-cache/) keep the weights on a
PersistentVolumeClaim that a download Job fills and every worker mounts as HF_HOME. Without
it each worker pod downloads the whole checkpoint (141 GB for a 70B model in BF16) into its
own container disk, and a startup probe that fires first makes it start over.

Here the workers also run offline (HF_HUB_OFFLINE=1): a worker can read the cache, never
download, and an init container holds it until the Job has written its completion marker.
The frontend mounts the same claim at the same path, read-only and offline too: Dynamo's
frontend reads the tokenizer and config files at the paths each worker registers
(lib/llm/src/model_card.rs) and, where they do not exist in its own pod, falls back to
downloading `hf://<id>/...`, which an air-gapped cluster (or a gated model without the token)
refuses; NVIDIA's recipes/llama-3-70b/vllm/disagg-multi-node/deploy.yaml mounts the cache on
its Frontend for this. Pure: returns Python objects.
"""

from __future__ import annotations

import math
import re
import shlex
from typing import Any

from ...topology import Topology
from .pod import (
    container_security_context,
    image_ref,
    labels,
    pod_security_context,
    quantity_gib,
)

CACHE_MOUNT = "/model-cache"
HF_HOME = f"{CACHE_MOUNT}/huggingface"
MARKER_DIR = f"{CACHE_MOUNT}/.dis-serve"
VOLUME = "model-cache"
# The mocker needs the tokenizer and config only, all JSON files in a Hugging Face repository.
TOKENIZER_FILES = "*.json"
# What NVIDIA's recipes leave out of a download (recipes/gpt-oss-120b/model-cache/
# model-download.yaml: `--exclude "original/*" --exclude "metal/*"`): a second copy of the
# weights for the reference implementation (Meta's Llama repositories keep their 16 GB
# consolidated.00.pth for the 8B there) and one for Apple's Metal, neither read by TensorRT-LLM.
EXCLUDES = ("original/*", "metal/*")
# A quarter more than the download (a revision change, hub metadata), in 10Gi steps.
HEADROOM = 1.25
# NVIDIA's recipes/llama-3-70b/model-cache/model-download.yaml downloads with hf_transfer
# (HF_HUB_ENABLE_HF_TRANSFER=1, the package pip-installed in the Job). huggingface_hub 1.x
# no longer uses hf_transfer (its constants.py warns the variable is ignored) and reaches the
# same speed through hf_xet with HF_XET_HIGH_PERFORMANCE=1: the Job sets both, so whichever
# hub the image ships downloads in parallel.
HF_TRANSFER = "hf_transfer==0.1.9"
HF_TRANSFER_DIR = f"{MARKER_DIR}/pip"


def local_path_problem(topo: Topology) -> str | None:
    """Why the cluster cannot find a model given as a local path (None: it can). A pod sees
    only the claim, at CACHE_MOUNT, and only a claim the user filled holds such a model."""
    model_id = topo.model.id
    if not model_id.startswith(("/", ".", "~")):
        return None
    if topo.kubernetes.model_cache.existing and model_id.startswith(CACHE_MOUNT + "/"):
        return None
    return (f"model.id {model_id!r} is a path on this machine, which no pod can read or "
            f"download; put the model on a ReadWriteMany claim, set "
            f"kubernetes.model_cache.existing: true and pvc: CLAIM, and model.id to its path "
            f"under {CACHE_MOUNT}/ (or use a Hugging Face id)")


def claim_name(topo: Topology) -> str:
    return topo.kubernetes.model_cache.pvc or f"{topo.name}-model-cache"


def job_name(topo: Topology) -> str:
    return f"{topo.name}-model-download"


def downloads(topo: Topology) -> bool:
    """Whether dis-serve fills the cache (else the user's existing claim holds the model)."""
    return not topo.kubernetes.model_cache.existing


def download_gb(topo: Topology) -> float:
    """Decimal GB the Job downloads (without EXCLUDES; the mocker: tokenizer and config)."""
    return topo.model_files_gb


def claim_size(topo: Topology) -> str:
    if (size := topo.kubernetes.model_cache.size) is not None:
        return size
    if not topo.backend.needs_gpu:
        return "1Gi"
    # 90Gi for Llama-3.1-70B in FP8, as NVIDIA's recipe sizes its 100Gi claim; 20Gi for the 8B.
    gib = download_gb(topo) * 1e9 / 2**30 * HEADROOM
    return f"{max(10, math.ceil(gib / 10) * 10)}Gi"


def claim_summary(topo: Topology) -> str | None:
    """What `validate` says the claim holds (None: no claim of ours). One too small for the
    checkpoint never gets here: topology/rules.check_model_cache refuses it."""
    if not downloads(topo):
        return None
    size = claim_size(topo)
    what = ("without " + ", ".join(EXCLUDES) if topo.backend.needs_gpu
            else "tokenizer and config only")
    return (f"claim {claim_name(topo)} of {size} ({quantity_gib(size) * 2**30 / 1e9:.1f} GB) "
            f"holds the {download_gb(topo):.1f} GB of {topo.model.id} ({what})")


def marker_path(topo: Topology) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "--", f"{topo.model.id}@{topo.model.revision}")
    return f"{MARKER_DIR}/{slug}.done"


def model_path(topo: Topology) -> str:
    """What the pods pass as --model. A pinned commit: its snapshot directory in the cache, as
    NVIDIA's disagg-multi-node recipe does (offline, the hub resolves an id through
    refs/<revision>, and `hf download --revision <commit>` writes no ref). A branch: the id,
    which the offline hub resolves through the ref the Job wrote."""
    model_id = topo.model.id
    if not downloads(topo) or topo.model.pinned_revision is None:
        return model_id
    return f"{HF_HOME}/hub/models--{model_id.replace('/', '--')}/snapshots/{topo.model.revision}"


def unpinned_revision_warning(topo: Topology) -> str | None:
    """`validate`'s warning when the download Job would fetch a moving branch."""
    if not downloads(topo) or not topo.backend.needs_gpu or topo.model.pinned_revision:
        return None
    return (f"model.revision is {topo.model.revision!r}: the Kubernetes download Job fetches "
            f"whatever {topo.model.id} holds when it runs, so two clusters (or a re-run) can "
            "serve different weights; set model.revision to a commit hash")


def render_claim(topo: Topology) -> dict[str, Any] | None:
    if not downloads(topo):
        return None
    cache = topo.kubernetes.model_cache
    spec: dict[str, Any] = {
        # Worker pods on every node mount it at once.
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": claim_size(topo)}},
    }
    if cache.storage_class is not None:
        spec["storageClassName"] = cache.storage_class
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim_name(topo), "namespace": topo.kubernetes.namespace,
                         "labels": labels(topo)},
            "spec": spec}


def _download_script(topo: Topology) -> str:
    argv = ["hf", "download", topo.model.id, "--revision", topo.model.revision]
    if topo.backend.needs_gpu:
        # One flag per pattern: `hf download` reads a second pattern after one flag as a file.
        argv += [word for pattern in EXCLUDES for word in ("--exclude", pattern)]
    steps = [shlex.join(["mkdir", "-p", MARKER_DIR])]
    if topo.backend.needs_gpu:
        # Kept on the claim, so a re-run does not fetch it again; a failed install (no PyPI
        # from the cluster) downloads without it rather than failing the Job.
        install = shlex.join(["python3", "-m", "pip", "install", "--quiet", "--no-cache-dir",
                              "--target", HF_TRANSFER_DIR, HF_TRANSFER])
        steps.append(f"if {install}; then export PYTHONPATH={shlex.quote(HF_TRANSFER_DIR)} "
                     "HF_HUB_ENABLE_HF_TRANSFER=1; fi")
    else:
        argv += ["--include", TOKENIZER_FILES]
    steps += [shlex.join(argv), shlex.join(["touch", marker_path(topo)])]
    return "set -eu; " + " && ".join(steps)


def render_download_job(topo: Topology) -> dict[str, Any] | None:
    """Runs once: a completed Job is not run again when the manifest is applied again. It
    runs the workers' own pinned image (which ships huggingface_hub's `hf`): nothing is
    installed at run time, and the node that pulls the image runs workers from it anyway."""
    if not downloads(topo):
        return None
    cache = topo.kubernetes.model_cache
    container = {
        "name": "download", "image": image_ref(topo),
        "command": ["sh", "-c", _download_script(topo)],
        # The token reaches this Job only; workers run offline and never see it. Optional,
        # as in NVIDIA's recipes/deepseek-r1/model-cache/model-download.yaml: a model that
        # is not gated downloads without one.
        "envFrom": [{"secretRef": {"name": cache.hf_token_secret, "optional": True}}],
        # hf_xet's chunk cache would live under HF_HOME, on the claim, beside the weights.
        "env": [{"name": "HF_HOME", "value": HF_HOME},
                {"name": "HF_XET_HIGH_PERFORMANCE", "value": "1"},
                {"name": "HF_XET_CHUNK_CACHE_SIZE_BYTES", "value": "0"}],
        "volumeMounts": [{"name": VOLUME, "mountPath": CACHE_MOUNT}],
        "resources": {"requests": {"cpu": "2", "memory": "8Gi"},
                      "limits": {"cpu": "2", "memory": "8Gi"}},
        "securityContext": container_security_context(topo, rdma=False),
    }
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": job_name(topo), "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "spec": {
            "backoffLimit": 3,
            "template": {"metadata": {"labels": labels(topo)}, "spec": {
                "restartPolicy": "Never",
                "securityContext": pod_security_context(topo),
                "containers": [container],
                "volumes": [cache_volume(topo)],
            }},
        },
    }


def cache_volume(topo: Topology) -> dict[str, Any]:
    return {"name": VOLUME, "persistentVolumeClaim": {"claimName": claim_name(topo)}}


def cache_mount(*, read_only: bool = False) -> dict[str, Any]:
    # Workers read-write: transformers and the hub client write lock files and their modules
    # cache under HF_HOME even when offline. The frontend (Rust) only reads the files.
    mount: dict[str, Any] = {"name": VOLUME, "mountPath": CACHE_MOUNT}
    if read_only:
        mount["readOnly"] = True
    return mount


def offline_env() -> list[dict[str, str]]:
    """A worker reads the cache and cannot download: a missing file fails the worker (and
    names the file) instead of filling the container disk."""
    return [{"name": "HF_HOME", "value": HF_HOME},
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {"name": "TRANSFORMERS_OFFLINE", "value": "1"}]


def wait_for_cache(topo: Topology) -> dict[str, Any] | None:
    """An init container that holds a worker until the download Job has finished, so the
    startup probe's budget is spent on loading, not on waiting for the download."""
    if not downloads(topo):
        return None
    marker = marker_path(topo)
    script = (f"until [ -f {shlex.quote(marker)} ]; do "
              f"echo {shlex.quote('waiting for Job ' + job_name(topo) + ' to fill the cache')}; "
              "sleep 10; done")
    return {
        "name": "wait-for-model-cache", "image": image_ref(topo),
        "command": ["sh", "-c", script],
        "volumeMounts": [{"name": VOLUME, "mountPath": CACHE_MOUNT, "readOnly": True}],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                      "limits": {"cpu": "100m", "memory": "64Mi"}},
        "securityContext": container_security_context(topo, rdma=False),
    }
