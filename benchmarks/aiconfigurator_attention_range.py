"""Where AIConfigurator's decode-attention data ends, and what it answers beyond it.

A decode step of a long-output run (70B FP8, TP2, 128/2048 at batch 512) reads up to
512 x 2,176 = 1.1M tokens of KV cache per layer, while AIConfigurator 0.12's measured
generation-attention table for that slice (32 query heads, 4 KV heads, head dim 128, FP8
KV cache per GPU) stops at batch x context of about 262k-524k tokens. This prints, per GPU:
the largest measured batch x context for each batch, and AIConfigurator's attention time per
layer at points inside and beyond that range as the KV bandwidth it implies (KV bytes read
per step / time), beside the GPU's peak memory bandwidth. If beyond-range answers implied a
bandwidth above what the largest measured points reach (or above the peak), extrapolation
would make long-output steps too fast; the figures say whether it does.

    python benchmarks/aiconfigurator_attention_range.py
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "toolkit"))

MODEL, TP = "llama-3.1-70b", 2
GPUS = {"h200": "h200_sxm", "h100-sxm": "h100_sxm"}
# (batch, context) probes: the largest measured points, then beyond the table.
PROBES = ((128, 4095), (256, 2047), (512, 1000), (128, 8000), (256, 4000), (512, 1500),
          (512, 2176), (1024, 1023))


def coverage(system: str, heads: int, kv_heads: int, head_dim: int) -> dict[int, int]:
    """Largest measured batch x context per batch in the FP8-KV generation-attention table."""
    from importlib import resources

    import pandas as pd

    root = resources.files("aiconfigurator_core").joinpath("systems", "data", system,
                                                            "attention", "trtllm")
    version = sorted(p.name for p in root.iterdir())[-1]
    table = pd.read_parquet(str(root.joinpath(version, "generation_attention_perf.parquet")))
    rows = table[(table.num_heads == heads) & (table.num_key_value_heads == kv_heads)
                 & (table.head_dim == head_dim) & (table.kv_cache_dtype == "fp8")
                 & (table.window_size == 0)]
    return {int(b): int(b * (g.step.max() + 1)) for b, g in rows.groupby("batch_size")}


def main() -> int:
    from aiconfigurator.sdk.config import RuntimeConfig

    from dis_serve.plan.model_choice import choose_perf_model
    from dis_serve.plan.request import build_request

    for gpu, system in GPUS.items():
        request = build_request(model=MODEL, gpu=gpu, isl=128, osl=2048, budget=TP, tp=TP,
                                ttft_ms=60000, itl_ms=1000, dtype="fp8",
                                kv_cache_dtype="fp8")
        target = request.target()
        arch = target.architecture
        model = choose_perf_model(target)
        heads, kv_heads = arch.attention_heads // TP, arch.kv_heads // TP
        covered = coverage(system, heads, kv_heads, arch.head_dim)
        print(f"## {gpu} ({system}), peak {target.gpu.bandwidth_tbps} TB/s")
        print("measured up to batch x context: "
              + ", ".join(f"b{b}: {t / 1e3:.0f}k" for b, t in covered.items()))
        kv_bytes_per_token_layer = 2 * kv_heads * arch.head_dim * 1  # FP8: one byte
        session = model._session(TP, context_role=False)
        print("| batch | context | tokens | in range | ms per layer | implied TB/s |")
        print("|---:|---:|---:|---|---:|---:|")
        for batch, context in PROBES:
            summary = session.run_static(RuntimeConfig(batch_size=batch, isl=context, osl=2),
                                         mode="static_gen", stride=32)
            per_layer = summary.get_generation_latency_dict()["generation_attention"] / (
                arch.layers)
            tokens = batch * (context + 1)
            inside = tokens <= covered.get(batch, 0)
            bandwidth = tokens * kv_bytes_per_token_layer / (per_layer / 1e3) / 1e12
            print(f"| {batch} | {context} | {tokens / 1e3:.0f}k | {'yes' if inside else 'no'} | "
                  f"{per_layer:.3f} | {bandwidth:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
