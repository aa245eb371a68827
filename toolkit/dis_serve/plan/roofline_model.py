"""An analytic roofline for GPUs and models AIConfigurator has no measured data for.

A forward pass costs the larger of its arithmetic time (FLOPs over the GPU's dense peak at a
sustained fraction `MFU_PREFILL`) and its memory time (weights plus KV cache read once, over HBM
bandwidth at a sustained fraction `HBM_EFFICIENCY`), plus tensor-parallel all-reduces (two
per layer, ring algorithm over NVLink) and a fixed per-layer cost for kernel launches and
small ops. Only the constants below are tuned, and they were fitted once, by least squares
on log latency, to AIConfigurator's measured H100 SXM TensorRT-LLM numbers for
Llama-3.1-8B, Llama-3.1-70B and Qwen3-32B (TP 1-8, prefill 512-8192 tokens, decode batch
1-256 at 1k-4k context, 225 points): it reproduces them with a median error of 2.6%, 9% at
the 90th percentile and 26% at worst (short or very long prompts at TP 4-8, where the real
kernels overlap communication differently).
`tests/unit/test_plan_perf_models.py` re-checks the agreement on every run.

For a GPU the fit never saw (the L4, say) only the vendor's peak numbers change, so treat
the answers as estimates: the plan says so, and the replay can only check consistency.
"""

from __future__ import annotations

from .perf_model import SERVING_CORRECTIONS, ModelOnGpu, PerfModel, PerfSource

# Fitted constants (see module docstring).
MFU_PREFILL = 0.735
"""Sustained share of dense peak FLOPs in a forward pass."""
HBM_EFFICIENCY = 0.89
"""Sustained share of HBM bandwidth while decoding."""
LAYER_OVERHEAD_MS = 0.047
"""Launches and small kernels per transformer layer per step."""
NVLINK_GBPS = 84.0
"""Effective per-GPU bandwidth of a ring all-reduce (GB/s), synchronisation included."""
PREFILL_COMM_EXPOSED = 0.43
"""Share of prefill all-reduce time not hidden behind GEMMs."""


class RooflineModel(PerfModel):
    source = PerfSource.ROOFLINE
    # Calibrated against AIConfigurator's raw op sums, so the same serving corrections apply.
    corrections = SERVING_CORRECTIONS

    def __init__(self, target: ModelOnGpu, reason: str | None = None) -> None:
        super().__init__(target)
        self.fallback_reason = reason

    @property
    def detail(self) -> str:
        gpu = self.target.gpu
        return (f"analytic roofline on {gpu.name} ({self._peak_tflops:.0f} dense TFLOPs, "
                f"{gpu.bandwidth_tbps:g} TB/s; MFU {MFU_PREFILL:.2f}, HBM efficiency "
                f"{HBM_EFFICIENCY:.2f}, fitted to AIConfigurator's H100 data)")

    @property
    def _peak_tflops(self) -> float:
        gpu = self.target.gpu
        # Weight-only formats (int8, awq) still multiply in bf16; fp8 uses the fp8 units.
        if self.target.dtype.value == "fp8" and gpu.dense_fp8_tflops:
            return gpu.dense_fp8_tflops
        return gpu.dense_bf16_tflops

    def _weights_bytes(self) -> float:
        return self.target.architecture.params_billion * 1e9 * self.target.dtype.bytes_per_param

    def _allreduce_ms(self, tp: int, tokens: int) -> float:
        if tp == 1:
            return 0.0
        arch = self.target.architecture
        payload = tokens * arch.hidden_size * 2.0  # activations stay bf16
        per_op = 2 * (tp - 1) / tp * payload / (NVLINK_GBPS * 1e6)
        return 2 * arch.layers * per_op

    def prefill_ms(self, tp: int, batch: int, isl: int) -> float:
        arch = self.target.architecture
        tokens = batch * isl
        # Causal attention: QK^T and AV over half the square, per prompt.
        attention = 2 * arch.layers * batch * isl * isl * arch.attention_heads * arch.head_dim
        flops = 2 * arch.params_billion * 1e9 * tokens + attention
        compute = flops / (tp * self._peak_tflops * 1e12 * MFU_PREFILL) * 1000
        memory = self._weights_bytes() / tp / (self.target.gpu.bandwidth_tbps * 1e12
                                               * HBM_EFFICIENCY) * 1000
        return (max(compute, memory) + PREFILL_COMM_EXPOSED * self._allreduce_ms(tp, tokens)
                + arch.layers * LAYER_OVERHEAD_MS)

    def decode_step_ms(self, tp: int, batch: int, context: int) -> float:
        arch = self.target.architecture
        kv = batch * context * self.target.kv_bytes_per_token
        memory = (self._weights_bytes() + kv) / tp / (
            self.target.gpu.bandwidth_tbps * 1e12 * HBM_EFFICIENCY) * 1000
        flops = 2 * arch.params_billion * 1e9 * batch
        compute = flops / (tp * self._peak_tflops * 1e12 * MFU_PREFILL) * 1000
        return (max(memory, compute) + self._allreduce_ms(tp, batch)
                + arch.layers * LAYER_OVERHEAD_MS)
