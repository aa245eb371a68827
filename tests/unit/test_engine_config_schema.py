"""Every engine config dis-serve writes, checked against TensorRT-LLM's own argument classes.

The reference is `tests/fixtures/trtllm/llm_args-main-0004396.json`: the fields, types and
defaults of `TorchLlmArgs` and the nested configs our YAML uses, read by hand from
`tensorrt_llm/llmapi/llm_args.py` (its header names the commit and why it is not the 1.3.0rc29
tag itself). TRT-LLM cannot be installed here, so this is how its schema gets a say: unknown
keys, wrong types, and the places where leaving a key out means something else than we mean.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "trtllm" / "llm_args-main-0004396.json"
SCHEMA = json.loads(FIXTURE.read_text())
CLASSES = SCHEMA["classes"]
TEMPLATES = sorted((REPO / "configs" / "trtllm").glob("*.yaml"))
GOLDEN = sorted((REPO / "tests" / "golden").glob("*/*/engine-configs/*.yaml"))
MANIFESTS = sorted((REPO / "tests" / "golden").glob("*/k8s/deployment.yaml"))


def _config_map_entries() -> list[tuple[str, dict]]:
    """(file: key, engine config) for every engine config the golden manifests ship."""
    entries = []
    for manifest in MANIFESTS:
        for doc in yaml.safe_load_all(manifest.read_text()):
            if doc and doc.get("kind") == "ConfigMap" and doc["metadata"]["name"].endswith(
                    "-engine-configs"):
                entries += [(f"{manifest.relative_to(REPO)}: {key}", yaml.safe_load(text))
                            for key, text in doc["data"].items()]
    return entries


def _fields(cls: str) -> dict[str, dict]:
    spec = CLASSES[cls]
    fields: dict[str, dict] = {}
    for base in spec["bases"]:
        fields.update(_fields(base))
    fields.update(spec["fields"])  # a subclass's own declaration wins (TorchLlmArgs.backend)
    return fields


def _check(value, annotation: ast.expr, path: str) -> list[str]:
    if isinstance(annotation, ast.Name):
        return _check_name(value, annotation.id, path)
    assert isinstance(annotation, ast.Subscript), ast.dump(annotation)
    head = annotation.value.id
    args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if head == "Optional":
        return [] if value is None else _check(value, args[0], path)
    if head == "Union":
        failures = [_check(value, arg, path) for arg in args]
        return [] if any(not f for f in failures) else failures[0]
    if head == "Literal":
        allowed = [ast.literal_eval(arg) for arg in args]
        return [] if value in allowed else [f"{path}: {value!r} is not one of {allowed}"]
    if head == "List":
        if not isinstance(value, list):
            return [f"{path}: {value!r} is not a list"]
        return [e for i, item in enumerate(value) for e in _check(item, args[0], f"{path}[{i}]")]
    if head == "Dict":
        if not isinstance(value, dict):
            return [f"{path}: {value!r} is not a mapping"]
        return [e for k, v in value.items() for e in _check(v, args[1], f"{path}.{k}")]
    raise AssertionError(f"the fixture uses an annotation the check does not know: {head}")


def _check_name(value, name: str, path: str) -> list[str]:
    scalars = {"bool": (bool,), "str": (str,), "int": (int,), "float": (int, float)}
    if name == "any":
        return []
    if name in scalars:
        # YAML true is a bool, and a bool is an int to Python: an int field must not take one.
        ok = isinstance(value, scalars[name]) and not (name != "bool" and isinstance(value, bool))
        return [] if ok else [f"{path}: {value!r} is not {name}"]
    if not isinstance(value, dict):
        return [f"{path}: {value!r} is not a {name} mapping"]
    return check_config(value, name, f"{path}.") if name in CLASSES else []  # unlisted: opaque


def _bounds(value, spec: dict, path: str) -> list[str]:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return []
    out = []
    if ("ge" in spec and value < spec["ge"]) or ("gt" in spec and value <= spec["gt"]):
        out.append(f"{path}: {value} is below the field's lower bound")
    if "le" in spec and value > spec["le"]:
        out.append(f"{path}: {value} is above the field's upper bound")
    return out


def check_config(config: dict, cls: str = "TorchLlmArgs", prefix: str = "") -> list[str]:
    """The problems TRT-LLM's pydantic models would raise for this YAML, as far as the fixture
    can see them."""
    fields = _fields(cls)
    problems = []
    for key, value in config.items():
        path = f"{prefix}{key}"
        if key not in fields:
            problems.append(f"{path}: unknown to {cls} (StrictBaseModel forbids extra keys)")
            continue
        spec = fields[key]
        problems += _check(value, ast.parse(spec["type"], mode="eval").body, path)
        problems += _bounds(value, spec, path)
    return problems


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _name(path: Path) -> str:
    return str(path.relative_to(REPO))


def _default(cls: str, field: str):
    return _fields(cls)[field]["default"]


def test_the_fixture_names_the_trtllm_source_it_was_read_from():
    source = SCHEMA["source"]
    assert source["repo"] == "NVIDIA/TensorRT-LLM"
    assert source["path"] == "tensorrt_llm/llmapi/llm_args.py"
    assert len(source["commit"]) == 40
    assert "1.3.0rc29" in source["pinned_version"]


def test_the_check_rejects_an_unknown_key_a_wrong_type_and_an_out_of_range_value():
    problems = check_config({"cuda_graph_configs": None, "max_batch_size": "8",
                             "kv_cache_config": {"free_gpu_memory_fraction": 1.5,
                                                 "enable_block_reuse": "yes"}})
    assert problems == [
        "cuda_graph_configs: unknown to TorchLlmArgs (StrictBaseModel forbids extra keys)",
        "max_batch_size: '8' is not int",
        "kv_cache_config.free_gpu_memory_fraction: 1.5 is above the field's upper bound",
        "kv_cache_config.enable_block_reuse: 'yes' is not bool",
    ]


@pytest.mark.parametrize("template", TEMPLATES, ids=_name)
def test_every_template_key_is_a_trtllm_field_of_the_right_type(template):
    assert check_config(_load(template)) == []


@pytest.mark.parametrize("config", GOLDEN, ids=_name)
def test_every_rendered_engine_config_passes_trtllm_s_schema(config):
    assert check_config(_load(config)) == []


def test_every_engine_config_a_golden_manifest_ships_passes_trtllm_s_schema():
    entries = _config_map_entries()
    assert entries  # the TRT-LLM graphs' manifests carry their engine configs
    for where, config in entries:
        assert check_config(config) == [], where


def test_the_golden_files_hold_engine_configs_of_every_role():
    assert {path.stem for path in GOLDEN} == {"agg", "prefill", "decode"}


def _by_role(role: str) -> list[Path]:
    return [p for p in TEMPLATES + GOLDEN if p.stem == role]


@pytest.mark.parametrize("config", _by_role("prefill"), ids=_name)
def test_prefill_writes_cuda_graphs_off_because_leaving_the_key_out_captures_them(config):
    assert _default("TorchLlmArgs", "cuda_graph_config") == "CudaGraphConfig()"
    loaded = _load(config)
    assert "cuda_graph_config" in loaded and loaded["cuda_graph_config"] is None


@pytest.mark.parametrize("config", _by_role("prefill"), ids=_name)
def test_prefill_turns_off_the_overlap_scheduler_that_trtllm_turns_on(config):
    assert _default("TorchLlmArgs", "disable_overlap_scheduler") is False
    assert _load(config)["disable_overlap_scheduler"] is True


@pytest.mark.parametrize("config", [p for p in GOLDEN if p.stem in ("prefill", "decode")],
                         ids=_name)
def test_both_disaggregated_sides_name_a_transceiver_backend_trtllm_leaves_unset(config):
    assert _default("BaseLlmArgs", "cache_transceiver_config") is None
    assert _default("CacheTransceiverConfig", "backend") is None
    transceiver = _load(config)["cache_transceiver_config"]
    assert transceiver["backend"] is not None and transceiver["max_tokens_in_buffer"] > 0


@pytest.mark.parametrize("config", [p for p in GOLDEN if p.stem in ("agg", "decode")], ids=_name)
def test_decode_graphs_reach_the_pools_batch_limit(config):
    # TRT-LLM sets the graph limit to max(batch_sizes); a larger batch would run without one.
    loaded = _load(config)
    assert max(loaded["cuda_graph_config"]["batch_sizes"]) == loaded["max_batch_size"]


@pytest.mark.parametrize("config", GOLDEN, ids=_name)
def test_the_sequence_limit_is_written_since_trtllm_would_take_the_checkpoints(config):
    # max_seq_len None: TRT-LLM derives it from the checkpoint (131072 for Llama 3.1) and sizes
    # the KV cache and the attention workspace for it.
    assert _default("BaseLlmArgs", "max_seq_len") is None
    assert isinstance(_load(config)["max_seq_len"], int)


@pytest.mark.parametrize("config", GOLDEN, ids=_name)
def test_chunked_prefill_is_on_though_trtllm_defaults_it_off(config):
    assert _default("BaseLlmArgs", "enable_chunked_prefill") is False
    assert _load(config)["enable_chunked_prefill"] is True


def test_the_tensorrt_llm_version_is_the_one_the_installed_dynamo_pins():
    """engines/trtllm.py states the image and the TensorRT-LLM it carries once; the version
    is what ai-dynamo 1.6.1's own wheel pins for its trtllm extra, the image's tag Dynamo's."""
    import importlib.metadata

    from dis_serve.engines.base import DYNAMO_VERSION
    from dis_serve.engines.trtllm import IMAGE, TRTLLM_VERSION

    pins = [r for r in importlib.metadata.requires("ai-dynamo") if r.startswith("tensorrt-llm")]
    assert pins == [f"tensorrt-llm=={TRTLLM_VERSION}; extra == 'trtllm'"]
    assert importlib.metadata.version("ai-dynamo") == DYNAMO_VERSION
    assert f"nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:{DYNAMO_VERSION}" == IMAGE
    # The llm_args reference says which version it stands for, and that it is not the tag.
    assert f"tensorrt-llm=={TRTLLM_VERSION}" in SCHEMA["source"]["pinned_version"]
    assert "v" + TRTLLM_VERSION in SCHEMA["source"]["version_gap"]
