"""compat/aisimulate-core: Dynamo 1.6.1's planner builds and tunes its forward-pass perf
model through the mapping onto aiconfigurator-core, with Dynamo's own adapter code."""

from __future__ import annotations

from dynamo.common.forward_pass_metrics import (
    ForwardPassMetrics,
    ScheduledRequestMetrics,
)
from dynamo.planner.config.planner_config import PlannerConfig
from dynamo.planner.core.perf_model.ais_adapter import PlannerEnginePerfModel
from dynamo.planner.core.types import EngineCapabilities


def _decode_model() -> PlannerEnginePerfModel:
    config = PlannerConfig(environment="virtual", backend="mocker", optimization_target="load",
                           decode_scale_up_kv_rate=50, decode_scale_down_kv_rate=10,
                           prefill_scale_up_queue_tokens=8192, prefill_scale_down_queue_tokens=0,
                           model_name="demo-model", decode_engine_num_gpu=1,
                           prefill_engine_num_gpu=1)
    caps = EngineCapabilities(num_gpu=1, max_num_batched_tokens=8192, max_num_seqs=256,
                              max_kv_tokens=8192, kv_cache_block_size=32)
    return PlannerEnginePerfModel(worker_type="decode", config=config, capabilities=caps)


def _decode_fpm(counter: int, requests: int) -> ForwardPassMetrics:
    kv = requests * 300
    return ForwardPassMetrics(worker_id="w", counter_id=counter, wall_time=0.004 + kv * 1e-7,
                              scheduled_requests=ScheduledRequestMetrics(
                                  num_decode_requests=requests, sum_decode_kv_tokens=kv))


def test_the_planner_builds_its_regression_model_through_the_mapping():
    model = _decode_model()
    assert model._engine_diagnostics()["source"] == "fallback_regression"


def test_live_forward_pass_metrics_tune_it_until_it_estimates_decode_itl():
    model = _decode_model()
    for counter in range(40):
        model.add_observations({("w", 0): _decode_fpm(counter, 1 + counter % 12)})
    assert model.has_sufficient_data()
    itl_s = model.estimate_scheduled_decode_itl([_decode_fpm(99, 8)], add_next_request=False)
    assert itl_s is not None and 0.001 < itl_s < 0.05


def test_aiconfigurators_measured_model_answers_for_a_known_deployment():
    from aisimulate_core.sdk import ForwardPassPerfModelConfig, RustForwardPassPerfModel

    request = ForwardPassPerfModelConfig.from_legacy_engine_config(
        {"schema_version": 1, "model_name": "meta-llama/Meta-Llama-3.1-70B",
         "system_name": "h100_sxm", "backend": "trtllm", "tp_size": 4, "pp_size": 1},
        "prefill", {"max_num_tokens": 8192, "max_batch_size": 64, "max_kv_tokens": 100000})
    model = RustForwardPassPerfModel.best_available(request.to_dict())
    prefill = {"version": 1, "scheduled_requests": {"num_prefill_requests": 1,
                                                    "sum_prefill_tokens": 3000}}
    assert model.diagnostics()["source"] == "aic"
    # The seed's 70B prefill on H100s: ~200 ms per request.
    assert 100 < model.estimate_forward_pass_time_ms([prefill]) < 400
