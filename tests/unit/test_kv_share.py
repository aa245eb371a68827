"""The KV cache gets the share of free GPU memory TensorRT-LLM is told to give it
(free_gpu_memory_fraction): the memory check, the planner and the mocker's blocks all use it."""

from __future__ import annotations

import pytest

from dis_serve.builtin import template_kv_share
from dis_serve.engines.trtllm import render_engine_config
from dis_serve.hardware.catalog import GPUS, KNOWN_MODELS, GpuType
from dis_serve.hardware.sizing import fit_worker_memory
from dis_serve.plan.emit import plan_topology
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.replay import kv_blocks
from dis_serve.plan.request import build_request
from dis_serve.topology import PoolRole, Topology

LLAMA_70B = KNOWN_MODELS["llama-3.1-70b"].architecture


def _fit(share: float, batch: int = 1):
    return fit_worker_memory(arch=LLAMA_70B, gpu=GPUS[GpuType.H100_SXM],
                             weight_bytes_per_param=1.0, kv_bytes_per_element=1.0,
                             tensor_parallel=2, batch=batch, seq_len=2208, kv_share=share)


def test_the_kv_cache_holds_its_share_of_the_memory_beside_weights_and_runtime():
    full, share = _fit(1.0), _fit(0.85)
    assert share.kv_room_gib == pytest.approx(0.85 * full.kv_room_gib)
    assert share.max_batch == int(0.85 * full.kv_room_gib / share.kv_gib_per_sequence)
    assert not _fit(0.85, batch=share.max_batch + 1).fits
    assert _fit(0.85, batch=share.max_batch).fits


def test_a_pool_without_its_own_share_gets_its_role_templates_as_the_engine_config_says():
    topo = Topology.model_validate({"name": "share", "model": {"id": "llama-3.1-8b"},
                                    "backend": "trtllm", "mode": "disagg",
                                    "pools": {"prefill": {}, "decode": {}}})
    for role in (PoolRole.PREFILL, PoolRole.DECODE):
        rendered = render_engine_config(topo, role)["kv_cache_config"]
        assert topo.kv_share(role) == rendered["free_gpu_memory_fraction"]
        assert topo.kv_share(role) == template_kv_share(role.value)


def _decode_heavy(batch: int, share: float | None = None) -> dict:
    decode = {"tensor_parallel": 2, "max_batch_size": batch}
    if share is not None:
        decode["free_gpu_memory_fraction"] = share
    return {"name": "share", "backend": "trtllm", "mode": "disagg",
            "model": {"id": "nvidia/Llama-3.1-70B-Instruct-FP8", "dtype": "fp8",
                      "kv_cache_dtype": "fp8", "max_input_tokens": 160,
                      "max_output_tokens": 2048},
            "pools": {"prefill": {"tensor_parallel": 2}, "decode": decode}}


def test_a_batch_past_the_templates_share_is_refused_naming_the_share_that_would_hold_it():
    batch = _fit(template_kv_share("decode")).max_batch + 5
    with pytest.raises(ValueError, match="raise free_gpu_memory_fraction"):
        Topology.model_validate(_decode_heavy(batch))
    assert Topology.model_validate(_decode_heavy(batch, share=0.95)).memory_fit(
        PoolRole.DECODE).fits


@pytest.fixture(scope="module")
def plans():
    ask = {"model": "llama-3.1-70b", "isl": 128, "osl": 2048, "budget": 2, "tp": 2,
           "ttft_ms": 60000.0, "itl_ms": 1000.0, "dtype": "fp8", "kv_cache_dtype": "fp8",
           "arrival": "offline", "replay": False}
    return {share: make_plan(build_request(**ask, kv_memory_fraction=share))
            for share in (None, 0.95)}


def test_a_larger_kv_share_lets_the_planner_run_more_sequences(plans):
    default, larger = plans[None].request.target(), plans[0.95].request.target()
    assert default.kv_share == template_kv_share("decode")
    assert larger.max_batch(2, 2208) > default.max_batch(2, 2208)


def test_the_emitted_topology_gives_the_kv_cache_the_share_the_plan_sized_for(plans):
    plan = plans[0.95]
    topo = plan_topology(plan.chosen, plan.request, plan.workload)
    role = PoolRole.AGG if plan.chosen.pool(PoolRole.AGG) else PoolRole.DECODE
    assert topo.pools.get(role).free_gpu_memory_fraction == 0.95
    default = plans[None]
    unset = plan_topology(default.chosen, default.request, default.workload)
    assert unset.pools.get(role).free_gpu_memory_fraction is None


def test_the_mockers_kv_blocks_follow_the_share(plans):
    pool = plans[0.95].chosen.pools[-1]
    larger = kv_blocks(plans[0.95].request.target(), pool)
    default = kv_blocks(plans[None].request.target(), pool)
    assert larger / default == pytest.approx(0.95 / template_kv_share("decode"), rel=0.01)
