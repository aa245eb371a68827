"""AIConfigurator's aggregated estimate against NVIDIA's measured throughput, at the batch
TensorRT-LLM itself ran: the evidence behind the serving corrections on aggregated workers
(`dis_serve.plan.perf_model.PerfModel.agg_point`).

The planner picks its own batch; a published figure was measured at trtllm-bench's. To test
the step-time model rather than the batch choice, each case of TensorRT-LLM 0.17's Llama
table (`benchmarks/published/trtllm_v017_llama_table.csv`, 88 cases) is estimated at the
batch its run used: the engine's max_batch_size and max_num_tokens from trtllm-bench's build
heuristic (tensorrt_llm/bench/build/tuning.py: KV room 0.95 of memory less the weights, the
batch rounded up, tokens at batch x (1 + ISL/OSL), at least 2048), the KV cache at the
document's 0.95 of what the weights and RUNTIME_RESERVE_GIB leave, 64-token blocks for whole
sequences, and the dynamic batch tuner (`runtime_batch_limit`). Printed per case: the raw
estimate over measured, and with AIConfigurator's serving corrections (1.1 prefill, 1.08
decode, which it applies to disaggregated workers only). Nothing is fitted.

    python benchmarks/aiconfigurator_at_trtllm_batch.py
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "toolkit"))

CASES_FILE = REPO / "benchmarks" / "published" / "trtllm_v017_llama_table.csv"
GIB = 1024**3
# The document's KV share ("we also use ... 0.95"), trtllm-bench's build assumption too.
KV_FRACTION = 0.95
# Activations, CUDA context and NCCL buffers beside the weights (an assumption: AIConfigurator
# reserves 3.5 GiB of "other" memory on Hopper plus activations).
RUNTIME_RESERVE_GIB = 4.0
TOKENS_PER_BLOCK = 64


def engine_settings(params: float, kv_bytes_per_token: float, gpu_gib: float, tp: int,
                    isl: int, osl: int) -> tuple[int, int]:
    """trtllm-bench build's max_batch_size and max_num_tokens for the dataset's lengths."""
    requests = ((gpu_gib * tp - params / GIB) * KV_FRACTION
                / (kv_bytes_per_token / GIB * (isl + osl)))
    raw_bs = min(requests, 4096)
    raw_tokens = min(raw_bs * (1 + isl / osl), 32768)
    step = 32 if raw_bs < 256 else 128 if raw_bs < 1024 else 256
    batch = max(64, step * math.ceil(raw_bs / step))
    tok_step = 256 if raw_tokens < 4096 else 512 if raw_tokens < 8192 else 1024
    tokens = max(2048, tok_step * math.ceil(raw_tokens / tok_step))
    return batch, tokens


def case_row(case: dict, models: dict) -> dict:
    from aiconfigurator.sdk.config import RuntimeConfig

    from dis_serve.plan.aiconfigurator_model import _quiet
    from dis_serve.plan.perf_model import runtime_batch_limit
    from dis_serve.plan.request import build_request

    tp, isl, osl = int(case["tp"]), int(case["isl"]), int(case["osl"])
    key = (case["model"], case["gpu"])
    if key not in models:
        from dis_serve.plan.model_choice import choose_perf_model

        request = build_request(model=case["model"], gpu=case["gpu"], isl=isl, osl=osl,
                                budget=8, ttft_ms=60000.0, itl_ms=1000.0, dtype="fp8",
                                kv_cache_dtype="fp8", replay=False)
        models[key] = choose_perf_model(request.target())
    model = models[key]
    target = model.target
    params = target.architecture.params_billion * 1e9
    max_bs, max_tokens = engine_settings(params, target.kv_bytes_per_token,
                                         target.gpu.memory_gib, tp, isl, osl)
    free_gib = target.gpu.memory_gib - params / GIB / tp - RUNTIME_RESERVE_GIB
    blocks = int(free_gib * KV_FRACTION * GIB / (target.kv_bytes_per_token / tp)
                 // TOKENS_PER_BLOCK)
    capacity = blocks // math.ceil((isl + osl) / TOKENS_PER_BLOCK)
    batch = max(1, min(max_bs, runtime_batch_limit(capacity)))
    with _quiet():
        summary = model._session(tp, False).run_agg(
            RuntimeConfig(batch_size=batch, isl=isl, osl=osl),
            ctx_tokens=max(max_tokens - batch, 256), max_seq_len=isl + osl,
            max_num_tokens=max_tokens, free_gpu_memory_fraction=KV_FRACTION)
    steps = summary.get_per_ops_data()["scheduling"]
    prefill_time = steps["num_mix_steps"] * steps["mix_step_latency_ms"]
    total = prefill_time + steps["num_genonly_steps"] * steps["genonly_step_latency_ms"]
    served = model.corrections
    scale = (prefill_time * served.prefill + (total - prefill_time) * served.decode) / total
    measured = float(case["output_tokens_per_s_per_tp_group"]) / tp
    raw = float(summary.get_result_dict()["tokens/s/gpu"])
    return {"case": f"{case['model']} {case['gpu']} TP{tp} {isl}/{osl}", "batch": batch,
            "raw": raw / measured, "served": raw / scale / measured}


def main() -> int:
    with CASES_FILE.open(newline="") as rows:
        cases = list(csv.DictReader(rows))
    models: dict = {}
    out = [case_row(case, models) for case in cases]
    print("| case | TRT-LLM batch | raw AIConfigurator / measured | with serving corrections |")
    print("|---|---:|---:|---:|")
    for r in out:
        print(f"| {r['case']} | {r['batch']} | {r['raw']:.3f} | {r['served']:.3f} |")
    for name in ("raw", "served"):
        ratios = [r[name] for r in out]
        print(f"{name}: {len(ratios)} cases, median {statistics.median(ratios):.3f}, "
              f"{sum(x > 1 for x in ratios)} above measured, "
              f"{sum(abs(x - 1) <= 0.1 for x in ratios)} within +-10%, median |error| "
              f"{statistics.median(abs(x - 1) for x in ratios):.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
