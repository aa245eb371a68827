"""Facts about hardware and models that topologies, checks and the planner share.

GPU figures are the vendors' published dense (no sparsity) numbers; prices are typical
on-demand cloud list prices per GPU-hour in late 2025 and are only defaults: every
topology and plan can override them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_gib: float
    bandwidth_tbps: float
    dense_bf16_tflops: float
    dense_fp8_tflops: float | None
    price_per_hour_usd: float
    aiconfigurator_system: str | None
    """The system name AIConfigurator's measured database uses, where it has one."""


class GpuType(StrEnum):
    H100_SXM = "h100-sxm"
    H200 = "h200"
    A100_80GB = "a100-80gb"
    L40S = "l40s"
    L4 = "l4"


GPUS: dict[GpuType, GpuSpec] = {
    GpuType.H100_SXM: GpuSpec("NVIDIA H100 SXM 80GB", 80.0, 3.35, 989.0, 1979.0, 2.99, "h100_sxm"),
    GpuType.H200: GpuSpec("NVIDIA H200 SXM 141GB", 141.0, 4.8, 989.0, 1979.0, 3.79, "h200_sxm"),
    GpuType.A100_80GB: GpuSpec("NVIDIA A100 SXM 80GB", 80.0, 2.04, 312.0, None, 1.79, "a100_sxm"),
    GpuType.L40S: GpuSpec("NVIDIA L40S 48GB", 48.0, 0.864, 362.0, 733.0, 1.19, "l40s"),
    GpuType.L4: GpuSpec("NVIDIA L4 24GB", 24.0, 0.3, 121.0, 242.0, 0.69, "l4"),
}


@dataclass(frozen=True)
class ModelArchitecture:
    """What sizing needs to know about a dense decoder-only transformer."""

    layers: int
    attention_heads: int
    kv_heads: int
    hidden_size: int
    params_billion: float
    vocab_size: int
    max_position_embeddings: int
    explicit_head_dim: int | None = None
    """config.json's `head_dim` where it differs from hidden_size / attention_heads
    (Qwen3-32B: 128, not 5120 / 64 = 80)."""

    @property
    def head_dim(self) -> int:
        return self.explicit_head_dim or self.hidden_size // self.attention_heads


@dataclass(frozen=True)
class Checkpoint:
    """A published checkpoint whose weights are already in one format.

    TensorRT-LLM's PyTorch backend does not quantize at load time: it runs the format the
    checkpoint declares (ModelOpt's hf_quant_config.json), so a weight format is a choice of
    checkpoint, never an engine setting.
    """

    hf_id: str
    quant_algo: str | None
    """The TensorRT-LLM QuantAlgo the checkpoint declares (None: unquantized 16-bit)."""
    source: str
    """Who publishes it and how it was made, for the error that names it."""


@dataclass(frozen=True)
class KnownModel:
    hf_id: str
    architecture: ModelArchitecture
    aiconfigurator_name: str | None
    """The model name AIConfigurator's database knows it by, where it does."""
    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    """Weight format (a WeightDtype value) -> the checkpoint that holds it. The bf16 entry
    is `hf_id` itself; formats without an entry need a checkpoint the user quantized."""

    def checkpoint(self, dtype: str) -> Checkpoint | None:
        return self.checkpoints.get(dtype)

    def dtype_of(self, model_id: str) -> str | None:
        """The weight format of `model_id` if it is one of this model's checkpoints."""
        for dtype, checkpoint in self.checkpoints.items():
            if model_id.lower() == checkpoint.hf_id.lower():
                return dtype
        return None


def _bf16(hf_id: str) -> Checkpoint:
    return Checkpoint(hf_id, None, "the original 16-bit release")


def _modelopt_fp8(hf_id: str) -> Checkpoint:
    return Checkpoint(hf_id, "FP8", "NVIDIA's FP8 checkpoint, quantized with Model Optimizer")


# Architecture numbers come from each model's published config.json.
KNOWN_MODELS: dict[str, KnownModel] = {
    "llama-3.1-70b": KnownModel(
        "meta-llama/Llama-3.1-70B-Instruct",
        ModelArchitecture(80, 64, 8, 8192, 70.6, 128256, 131072),
        "meta-llama/Meta-Llama-3.1-70B",
        {"bf16": _bf16("meta-llama/Llama-3.1-70B-Instruct"),
         "fp8": _modelopt_fp8("nvidia/Llama-3.1-70B-Instruct-FP8")},
    ),
    "llama-3.1-8b": KnownModel(
        "meta-llama/Llama-3.1-8B-Instruct",
        ModelArchitecture(32, 32, 8, 4096, 8.03, 128256, 131072),
        "meta-llama/Meta-Llama-3.1-8B",
        {"bf16": _bf16("meta-llama/Llama-3.1-8B-Instruct"),
         # The checkpoint Dynamo 1.6.1's own mocker DGD template serves.
         "fp8": _modelopt_fp8("nvidia/Llama-3.1-8B-Instruct-FP8")},
    ),
    # MLPerf Inference's Llama-2-70B benchmark model. AIConfigurator 0.12 ships no config for
    # it, so the planner hands AIConfigurator ours (builtin/model_configs/): the same layers
    # as Llama-3.1-70B with a 32,000-token vocabulary and a 4,096-token context.
    "llama-2-70b": KnownModel(
        "meta-llama/Llama-2-70b-chat-hf",
        ModelArchitecture(80, 64, 8, 8192, 68.98, 32000, 4096),
        "meta-llama/Llama-2-70b-chat-hf",
        {"bf16": _bf16("meta-llama/Llama-2-70b-chat-hf")},
    ),
    "qwen3-32b": KnownModel(
        "Qwen/Qwen3-32B",
        ModelArchitecture(64, 64, 8, 5120, 32.8, 151936, 40960, explicit_head_dim=128),
        "Qwen/Qwen3-32B",
        {"bf16": _bf16("Qwen/Qwen3-32B")},
    ),
    # The demo's tokenizer-only model card for the mocker: tiny, so checks never get in the way.
    "dis-serve-tiny": KnownModel(
        "dis-serve/tiny-mock",
        ModelArchitecture(4, 8, 8, 512, 0.05, 50005, 32768),
        None,
        {"bf16": _bf16("dis-serve/tiny-mock")},
    ),
}


def _normalise(name: str) -> str:
    return name.lower().rsplit("/", 1)[-1].replace("meta-", "").replace("-instruct", "")


def find_known_model(name: str) -> KnownModel | None:
    """Look a model up by catalog key, by any HF id naming the same model, or by the id of
    one of its checkpoints (nvidia/Llama-3.1-70B-Instruct-FP8 is Llama-3.1-70B)."""
    key = _normalise(name)
    for catalog_key, model in KNOWN_MODELS.items():
        if model.dtype_of(name) is not None:
            return model
        if key in (catalog_key, _normalise(model.hf_id)):
            return model
        if model.aiconfigurator_name and key == _normalise(model.aiconfigurator_name):
            return model
    return None
