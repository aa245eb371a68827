"""Every weight format reaches the workers: through the checkpoint they load, or it is refused.

TRT-LLM's PyTorch backend runs the format a checkpoint declares and never quantizes at load
time, so `model.dtype` is only true if `model.id` names a checkpoint in that format.
"""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS
from dis_serve.hardware.catalog import KNOWN_MODELS
from dis_serve.render.engine_config import render_engine_configs
from dis_serve.topology import KvCacheDtype, Topology, WeightDtype

BASE = yaml.safe_load((GRAPHS / "llama8b-8gpu-disagg.yaml").read_text())


def _topology(model_id: str, dtype: WeightDtype, **model) -> Topology:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["model"].update(id=model_id, dtype=dtype.value, **model)
    return Topology.model_validate(data)


@pytest.mark.parametrize("dtype", list(WeightDtype))
@pytest.mark.parametrize("key", ["llama-3.1-70b", "llama-3.1-8b", "qwen3-32b"])
def test_every_dtype_of_a_catalog_model_ends_in_a_checkpoint_of_that_format_or_is_refused(
        key, dtype):
    known = KNOWN_MODELS[key]
    checkpoint = known.checkpoint(dtype.value)
    if checkpoint is None:
        with pytest.raises(ValidationError, match="Model Optimizer"):
            _topology(known.hf_id, dtype)
        return
    if key == "llama-3.1-8b":  # the base graph is sized for 8B on one node
        assert _topology(checkpoint.hf_id, dtype).model.id == checkpoint.hf_id


@pytest.mark.parametrize("dtype", [d for d in WeightDtype if d.needs_quantized_checkpoint])
def test_a_quantized_dtype_on_the_16_bit_checkpoint_is_refused(dtype):
    with pytest.raises(ValidationError, match="is the bf16 checkpoint"):
        _topology(KNOWN_MODELS["llama-3.1-8b"].hf_id, dtype)


def test_the_mocker_loads_no_weights_so_any_checkpoint_serves_its_tokenizer():
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["model"]["dtype"] = "fp8"
    assert Topology.model_validate(data).model.dtype is WeightDtype.FP8


@pytest.mark.parametrize("kv", list(KvCacheDtype))
def test_every_kv_cache_dtype_ends_in_the_engine_config(kv):
    topo = _topology(KNOWN_MODELS["llama-3.1-8b"].hf_id, WeightDtype.BF16,
                     kv_cache_dtype=kv.value)
    for config in render_engine_configs(topo).values():
        assert config["kv_cache_config"]["dtype"] == kv.engine_dtype
