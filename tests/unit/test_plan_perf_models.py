"""The performance models: AIConfigurator's measured data first, the roofline behind it."""

from __future__ import annotations

import statistics

import pytest

from dis_serve.hardware.catalog import GPUS, GpuType, find_known_model
from dis_serve.plan.model_choice import choose_perf_model
from dis_serve.plan.perf_model import SERVING_CORRECTIONS, ModelOnGpu, PerfSource
from dis_serve.plan.roofline_model import RooflineModel
from dis_serve.topology import KvCacheDtype, WeightDtype


def target(model: str, gpu: GpuType = GpuType.H100_SXM) -> ModelOnGpu:
    known = find_known_model(model)
    return ModelOnGpu(model, known.aiconfigurator_name, known.architecture, WeightDtype.BF16,
                      KvCacheDtype.BF16, gpu.value, GPUS[gpu])


@pytest.fixture(scope="module")
def aic_70b():
    return choose_perf_model(target("llama-3.1-70b"))


def test_aiconfigurator_answers_for_llama_70b_on_h100(aic_70b):
    assert aic_70b.source is PerfSource.AICONFIGURATOR
    assert "h100_sxm/trtllm" in aic_70b.detail
    assert aic_70b.fallback_reason is None


def test_serving_corrections_are_aiconfigurators_own_defaults():
    from aiconfigurator.cli.api import (
        DEFAULT_DECODE_LATENCY_CORRECTION_SCALE,
        DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE,
    )

    assert SERVING_CORRECTIONS.prefill == DEFAULT_PREFILL_LATENCY_CORRECTION_SCALE
    assert SERVING_CORRECTIONS.decode == DEFAULT_DECODE_LATENCY_CORRECTION_SCALE


def test_prefill_gets_slower_with_longer_prompts_and_faster_with_more_gpus(aic_70b):
    assert aic_70b.prefill_ms(4, 1, 1000) < aic_70b.prefill_ms(4, 1, 4000)
    assert aic_70b.prefill_ms(8, 1, 3000) < aic_70b.prefill_ms(4, 1, 3000)


def test_decode_steps_get_slower_with_batch_and_context(aic_70b):
    assert aic_70b.decode_step_ms(4, 16, 3000) < aic_70b.decode_step_ms(4, 128, 3000)
    assert aic_70b.decode_step_ms(4, 64, 1000) < aic_70b.decode_step_ms(4, 64, 8000)


def test_generation_average_matches_the_mean_of_its_steps(aic_70b):
    steps = [aic_70b.decode_step_ms(4, 64, c) for c in range(3000, 3500, 25)]
    assert aic_70b.decode_itl_ms(4, 64, 3000, 500) == pytest.approx(
        statistics.fmean(steps), rel=0.02)


def test_a_batch_fits_only_when_both_memory_models_agree(aic_70b):
    assert aic_70b.kv_fits(4, 64, 3500)
    assert not aic_70b.kv_fits(4, 400, 3500)
    assert not aic_70b.kv_fits(1, 1, 3500)  # 141 GB of bf16 weights on one 80 GB GPU


def test_gpus_without_measured_data_fall_back_to_the_roofline_and_say_why():
    model = choose_perf_model(target("llama-3.1-8b", GpuType.L4))
    assert model.source is PerfSource.ROOFLINE
    assert "l4" in model.fallback_reason


def test_the_roofline_stays_close_to_aiconfigurator_on_h100():
    """The calibration the roofline's constants claim, re-checked on measured data."""
    errors = []
    for name in ("llama-3.1-8b", "llama-3.1-70b", "qwen3-32b"):
        aic = choose_perf_model(target(name))
        roofline = RooflineModel(target(name))
        for tp in (2, 4, 8):
            for isl in (1024, 4096):
                errors.append(roofline.prefill_ms(tp, 1, isl) / aic.prefill_ms(tp, 1, isl) - 1)
            for batch in (8, 64):
                errors.append(roofline.decode_step_ms(tp, batch, 2048)
                              / aic.decode_step_ms(tp, batch, 2048) - 1)
    assert statistics.median(abs(e) for e in errors) < 0.10
    assert max(abs(e) for e in errors) < 0.35


@pytest.mark.parametrize(("model", "dtype", "kv", "modes"), [
    # NVIDIA's ModelOpt FP8 checkpoints: static per-tensor FP8 GEMMs, FP8 attention.
    ("llama-3.1-8b", WeightDtype.FP8, KvCacheDtype.FP8, ("fp8_static", "fp8", "fp8")),
    ("llama-3.1-70b", WeightDtype.FP8, KvCacheDtype.FP8, ("fp8_static", "fp8", "fp8")),
    # FP8 attention needs the FP8 KV cache it is calibrated with.
    ("llama-3.1-8b", WeightDtype.FP8, KvCacheDtype.BF16, ("fp8_static", "bfloat16", "bfloat16")),
    ("llama-3.1-8b", WeightDtype.BF16, KvCacheDtype.BF16, ("bfloat16", "bfloat16", "bfloat16")),
    ("qwen3-32b", WeightDtype.AWQ, KvCacheDtype.FP8, ("int4_wo", "bfloat16", "fp8")),
])
def test_a_checkpoint_format_maps_to_one_set_of_aiconfigurator_modes(model, dtype, kv, modes):
    from dataclasses import replace

    from dis_serve.plan.aiconfigurator_model import quant_modes

    got = quant_modes(replace(target(model), dtype=dtype, kv_cache_dtype=kv))
    assert (got["gemm_quant_mode"], got["fmha_quant_mode"], got["kvcache_quant_mode"]) == modes


def test_aggregated_workers_carry_the_serving_corrections_disaggregated_ones_do(aic_70b):
    """AIConfigurator's aggregated estimate sums the same per-operation data its serving
    corrections are for; an aggregated plan is charged them as a disaggregated one is."""
    raw = aic_70b._agg_estimate(4, 64, 4000, 2000, 500, 2532)
    point = aic_70b.agg_point(4, 64, 4000, 2000, 500, 2532)
    served = aic_70b.corrections
    assert point.itl_ms == pytest.approx(raw.itl_ms * served.decode)
    assert point.ttft_ms == pytest.approx(raw.ttft_ms * served.prefill)
    slowest, fastest = max(served.prefill, served.decode), min(served.prefill, served.decode)
    assert raw.rate_per_s / slowest <= point.rate_per_s <= raw.rate_per_s / fastest


def test_tensorrt_llms_batch_tuner_never_runs_more_than_the_cache_holds():
    from dis_serve.plan.perf_model import runtime_batch_limit

    limits = [runtime_batch_limit(c) for c in range(1, 4096)]
    assert all(limit <= c for limit, c in zip(limits, range(1, 4096), strict=True))
    assert limits == sorted(limits)  # more cache never runs fewer requests


def test_a_plan_never_caps_a_batch_above_what_the_batch_tuner_runs():
    """70B FP8 on two H200s holds ~620 sequences of 2,032 tokens; TensorRT-LLM runs 512."""
    from dis_serve.plan.recommend import make_plan
    from dis_serve.plan.request import build_request

    plan = make_plan(build_request(
        model="llama-3.1-70b", gpu="h200", isl=1000, osl=1000, budget=2, tp=2,
        ttft_ms=60000.0, itl_ms=1000.0, dtype="fp8", kv_cache_dtype="fp8", arrival="offline",
        replay=False))
    target, seq_len = plan.request.target(), plan.space.seq_len
    assert target.max_batch(2, seq_len) > target.runtime_batch(2, seq_len)
    assert all(c.pools[0].max_batch <= target.runtime_batch(2, seq_len)
               for c in plan.candidates)
