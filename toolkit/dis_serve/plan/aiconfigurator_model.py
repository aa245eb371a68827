"""Performance from NVIDIA AIConfigurator's measured per-operation database.

AIConfigurator (`aiconfigurator-core` on PyPI) ships GEMM, attention, communication and
other kernel timings collected on real GPUs for each TensorRT-LLM release, and sums them per
forward pass. We ask it for exactly what the planner needs: one prefill pass (`static_ctx`),
decode steps (`static_gen`) and, for aggregated workers, its own in-flight-batching estimate
(`run_agg`: mixed prefill/decode steps under a per-step context-token budget) and mixed steps
(`run_mixed`). Its package is heavy (pandas, pyarrow, a native engine), so
it is imported only when this model is built.
"""

from __future__ import annotations

import contextlib
import functools
import io
import logging
import warnings
from dataclasses import dataclass
from importlib import resources
from typing import Any

from ..engines import planned_engine
from ..hardware.catalog import find_known_model
from ..topology import KvCacheDtype, WeightDtype
from .perf_model import (
    SERVING_CORRECTIONS,
    AggPoint,
    ModelOnGpu,
    PerfModel,
    PerfSource,
    steady_prompt_steps,
)

# AIConfigurator's name for the engine the planner sizes graphs of (engines/).
BACKEND = planned_engine().aiconfigurator_backend

_KV_MODE = {KvCacheDtype.BF16: "bfloat16", KvCacheDtype.FP8: "fp8"}


@dataclass(frozen=True)
class QuantModes:
    """How AIConfigurator times one checkpoint format: its GEMM mode, and whether context
    attention runs in FP8 (where the checkpoint calibrates attention with an FP8 KV cache)."""

    gemm: str
    fp8_attention: bool = False


# The one table from checkpoint to AIConfigurator: keyed by the TensorRT-LLM QuantAlgo the
# checkpoint declares (hf_quant_config.json), which is what TensorRT-LLM runs. NVIDIA's
# ModelOpt FP8 checkpoints (Llama-3.1-8B and -70B-Instruct-FP8, and what ModelOpt's FP8
# recipe writes for any model) hold per-tensor static scales and FP8 KV-cache scales: static
# FP8 GEMMs and FP8 context attention. The QuantAlgo is the catalog's published checkpoint's,
# else what NVIDIA Model Optimizer writes for the format (what `validate` tells the user to
# quantize with), MODELOPT_QUANT_ALGO.
QUANT_MODES: dict[str | None, QuantModes] = {
    None: QuantModes("bfloat16"),
    "FP8": QuantModes("fp8_static", fp8_attention=True),
    "FP8_BLOCK_SCALES": QuantModes("fp8_block", fp8_attention=True),
    "W8A16": QuantModes("int8_wo"),
    "W4A16_AWQ": QuantModes("int4_wo"),
}

MODELOPT_QUANT_ALGO: dict[WeightDtype, str | None] = {
    WeightDtype.BF16: None, WeightDtype.FP8: "FP8", WeightDtype.INT8: "W8A16",
    WeightDtype.AWQ: "W4A16_AWQ"}


def quant_modes(target: ModelOnGpu) -> dict[str, str]:
    """AIConfigurator's GEMM, KV-cache and context-attention modes for the target's
    checkpoint (FP8 attention needs an FP8 KV cache)."""
    known = find_known_model(target.name)
    checkpoint = known.checkpoint(target.dtype.value) if known else None
    algo = checkpoint.quant_algo if checkpoint else MODELOPT_QUANT_ALGO[target.dtype]
    modes = QUANT_MODES[algo]
    fp8_attention = modes.fp8_attention and target.kv_cache_dtype is KvCacheDtype.FP8
    return {"gemm_quant_mode": modes.gemm, "kvcache_quant_mode": _KV_MODE[target.kv_cache_dtype],
            "fmha_quant_mode": "fp8" if fp8_attention else "bfloat16"}


class AiconfiguratorUnavailable(Exception):
    """AIConfigurator cannot answer for this model, GPU or format; the message says why."""


def _quiet():
    """AIConfigurator logs data-fallback notes and deprecation banners by the dozen;
    none of them changes what we read, so keep them off the user's terminal."""
    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    for name in ("aiconfigurator", "aiconfigurator_core"):
        logger = logging.getLogger(name)
        previous = logger.level
        logger.setLevel(logging.ERROR)
        stack.callback(logger.setLevel, previous)
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    return stack


def model_config_path(aic_name: str) -> str | None:
    """What AIConfigurator is handed for `aic_name`: the name, where it ships the config;
    else the directory of the config we ship (it reads a local directory's config.json);
    else None. It would download configs from Hugging Face, which a plan never waits on."""
    filename = aic_name.replace("/", "--")
    if resources.files("aiconfigurator_core").joinpath(
            "model_configs", filename + "_config.json").is_file():
        return aic_name
    ours = resources.files("dis_serve").joinpath("builtin", "model_configs", filename)
    return str(ours) if ours.joinpath("config.json").is_file() else None


@functools.cache
def _latest_database_version(system: str) -> str | None:
    """The newest database AIConfigurator ships for `system` and the planned engine. It
    parses every database's YAML description (1-3 s) on each call, while the installed
    package cannot change under a running process: asked once per process."""
    from aiconfigurator.sdk.perf_database import get_latest_database_version

    return get_latest_database_version(system=system, backend=BACKEND)


class AiconfiguratorModel(PerfModel):
    source = PerfSource.AICONFIGURATOR
    corrections = SERVING_CORRECTIONS

    def __init__(self, target: ModelOnGpu) -> None:
        super().__init__(target)
        if target.aiconfigurator_name is None:
            raise AiconfiguratorUnavailable(
                f"AIConfigurator has no measured data for model {target.name}")
        if target.gpu.aiconfigurator_system is None:
            raise AiconfiguratorUnavailable(
                f"AIConfigurator has no measured data for GPU {target.gpu_name}")
        # The architecture from the model's own config, the formats from QUANT_MODES (not
        # from whichever quantized config AIConfigurator happens to ship).
        self._model_name = target.aiconfigurator_name
        self._model_path = model_config_path(target.aiconfigurator_name)
        self._modes = quant_modes(target)
        self._system = target.gpu.aiconfigurator_system
        with _quiet():
            self._load()
        self._sessions: dict[tuple[int, bool], Any] = {}
        self._cache: dict[tuple, Any] = {}

    def _load(self) -> None:
        if self._model_path is None:
            raise AiconfiguratorUnavailable(
                f"AIConfigurator ships no config for {self._model_name}")
        from aiconfigurator.sdk.perf_database import get_database_view

        version = _latest_database_version(self._system)
        if version is None:
            raise AiconfiguratorUnavailable(
                f"AIConfigurator has no {BACKEND} database for {self._system}")
        self._version = version
        self._database = get_database_view(
            self._system, BACKEND, version, allow_missing_data=False,
            database_mode="SILICON", transfer_policy=None)
        if self._database is None:
            raise AiconfiguratorUnavailable(
                f"AIConfigurator could not load {self._system}/{BACKEND} {version}")

    @property
    def detail(self) -> str:
        from importlib.metadata import version

        return (f"AIConfigurator {version('aiconfigurator-core')} measured database "
                f"{self._system}/{BACKEND} {self._version}, model {self._model_name} (GEMM "
                f"{self._modes['gemm_quant_mode']}, context attention "
                f"{self._modes['fmha_quant_mode']}, KV cache {self._modes['kvcache_quant_mode']})")

    def _session(self, tp: int, context_role: bool):
        key = (tp, context_role)
        if key not in self._sessions:
            from aiconfigurator.sdk.backends.factory import get_backend
            from aiconfigurator.sdk.config_builders import build_model_config
            from aiconfigurator.sdk.inference_session import InferenceSession
            from aiconfigurator.sdk.models import get_model, resolve_context_fmha_by_data

            config = build_model_config(tp, 1, 1, None, None, **self._modes)
            resolve_context_fmha_by_data(config, self._model_path, self._database, BACKEND,
                                         is_context_role=context_role)
            model = get_model(self._model_path, config, BACKEND)
            # One backend per session: its caches are keyed without the parallelism.
            self._sessions[key] = InferenceSession(model, self._database, get_backend(BACKEND))
        return self._sessions[key]

    def _static(self, tp: int, mode: str, batch: int, isl: int, osl: int) -> dict:
        key = ("static", tp, mode, batch, isl, osl)
        if key not in self._cache:
            from aiconfigurator.sdk.config import RuntimeConfig

            with _quiet():
                session = self._session(tp, context_role=mode == "static_ctx")
                try:
                    summary = session.run_static(
                        RuntimeConfig(batch_size=batch, isl=isl, osl=osl), mode=mode,
                        stride=32)
                except Exception as exc:  # its data gaps surface as assorted errors
                    raise AiconfiguratorUnavailable(
                        f"AIConfigurator cannot predict {mode} tp{tp} batch {batch} "
                        f"isl {isl}: {exc}") from exc
            self._cache[key] = summary.get_result_dict()
        return self._cache[key]

    def prefill_ms(self, tp: int, batch: int, isl: int) -> float:
        return float(self._static(tp, "static_ctx", batch, isl, 1)["ttft"])

    def decode_step_ms(self, tp: int, batch: int, context: int) -> float:
        return float(self._static(tp, "static_gen", batch, context, 2)["tpot"])

    def decode_itl_ms(self, tp: int, batch: int, isl: int, osl: int) -> float:
        # static_gen walks the whole generation (every 32nd step) and averages.
        return float(self._static(tp, "static_gen", batch, isl, osl)["tpot"])

    def kv_fits(self, tp: int, batch: int, seq_len: int) -> bool:
        """Both dis-serve's sizing (what the topology check enforces) and AIConfigurator's
        own memory model (TRT-LLM's allocator) must agree that the batch fits."""
        if not super().kv_fits(tp, batch, seq_len):
            return False
        key = ("fits", tp, batch, seq_len)
        if key not in self._cache:
            from aiconfigurator.sdk.config import RuntimeConfig

            with _quiet():
                session = self._session(tp, context_role=False)
                summary = session.run_static(
                    RuntimeConfig(batch_size=batch, isl=max(1, seq_len - 1), osl=2),
                    mode="static_gen", stride=32)
                self._cache[key] = not summary.check_oom() and not summary.check_kv_cache_oom()
        return self._cache[key]

    def _agg_estimate(self, tp: int, batch: int, ctx_tokens: int, isl: int, osl: int,
                      seq_len: int) -> AggPoint:
        key = ("agg", tp, batch, ctx_tokens, isl, osl, seq_len)
        if key not in self._cache:
            from aiconfigurator.sdk.config import RuntimeConfig

            with _quiet():
                session = self._session(tp, context_role=False)
                try:
                    summary = session.run_agg(
                        RuntimeConfig(batch_size=batch, isl=isl, osl=osl),
                        ctx_tokens=ctx_tokens, max_seq_len=seq_len,
                        max_num_tokens=ctx_tokens + batch)
                except Exception as exc:  # its data gaps surface as assorted errors
                    raise AiconfiguratorUnavailable(
                        f"AIConfigurator cannot predict agg tp{tp} batch {batch} "
                        f"ctx {ctx_tokens} isl {isl}: {exc}") from exc
                row = summary.get_result_dict()
                steps = summary.get_per_ops_data()["scheduling"]
            total = (steps["num_mix_steps"] * steps["mix_step_latency_ms"]
                     + steps["num_genonly_steps"] * steps["genonly_step_latency_ms"])
            # The mixed step's pure prompt cost (AIConfigurator's own TTFT before its
            # all-at-once queueing factor), for the request's own prompt steps.
            prompt_step_ms = steps["mix_step_latency_ms"] / (steps.get("mix_efficiency") or 1.0)
            self._cache[key] = AggPoint(
                ttft_ms=prompt_step_ms * steady_prompt_steps(isl, ctx_tokens),
                itl_ms=float(row["tpot"]),
                rate_per_s=float(row["seq/s"]),
                prefill_share=steps["num_mix_steps"] * steps["mix_step_latency_ms"] / total,
                fits=(super().kv_fits(tp, batch, seq_len) and not summary.check_oom()
                      and not summary.check_kv_cache_oom()))
        return self._cache[key]

    def mixed_step_ms(self, tp: int, ctx_tokens: int, decoding: int, isl: int,
                      osl: int) -> float:
        key = ("mixed", tp, ctx_tokens, decoding, isl, osl)
        if key not in self._cache:
            from aiconfigurator.sdk.config import RuntimeConfig
            from aiconfigurator.sdk.step_estimate import MixedStepInput

            with _quiet():
                session = self._session(tp, context_role=False)
                estimate = session.run_mixed(
                    RuntimeConfig(batch_size=max(1, decoding), isl=isl, osl=osl),
                    MixedStepInput(context_tokens=ctx_tokens, num_decode_requests=decoding))
            self._cache[key] = float(estimate.latency_ms)
        return self._cache[key]
