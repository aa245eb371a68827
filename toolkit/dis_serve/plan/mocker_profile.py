"""The mocker's timing tables for a plan, written from the same performance model.

Dynamo's mocker (`--planner-profile-data FILE.npz`) looks up a forward pass's latency by
linear interpolation in two tables: prefill time against the prompt tokens in the step
(`prefill_isl`, `prefill_ttft_ms`), and decode step time against the active KV tokens and the
mean context per sequence (`decode_active_kv_tokens` x `decode_context_length` ->
`decode_itl`). An aggregated step costs the sum of both. Filling them from the plan's model,
with the plan's corrections, makes the mocker (and Dynamo's replay, which runs the same
engine) time itself like the planned GPUs instead of its built-in defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..topology import Mode, PoolRole
from .perf_model import PerfModel
from .search import Candidate

PREFILL_POINTS = 32
DECODE_KV_POINTS = 32
DECODE_CONTEXT_POINTS = 24


@dataclass(frozen=True)
class ProfileTables:
    prefill_isl: list[float]
    prefill_ttft_ms: list[float]
    decode_active_kv_tokens: list[float]
    decode_context_length: list[float]
    decode_itl: list[list[float]]


def _grid(start: float, stop: float, points: int) -> list[float]:
    step = (stop - start) / (points - 1)
    return [start + i * step for i in range(points)]


def profile_tables(model: PerfModel, plan: Candidate, workload_isl: int,
                   seq_len: int, osl: int | None = None) -> ProfileTables:
    """Tables for the plan's prefill (or aggregated) and decode (or aggregated) workers."""
    osl = plan.osl if osl is None else osl
    if plan.mode is Mode.DISAGG:
        prefill, decode = plan.pool(PoolRole.PREFILL), plan.pool(PoolRole.DECODE)
        prefill_scale, decode_scale = model.corrections.prefill, model.corrections.decode
        isl = _grid(1.0, float(max(prefill.max_num_tokens, seq_len)), PREFILL_POINTS)
        ttft = [_prefill_step_ms(model, prefill.tp, n, workload_isl) * prefill_scale
                for n in isl]
    else:
        prefill = decode = plan.pool(PoolRole.AGG)
        # Aggregated predictions carry the same corrections as disaggregated ones
        # (`PerfModel.agg_point`); the tables follow the plan's numbers.
        decode_scale = model.corrections.decode
        isl = _grid(1.0, float(max(prefill.max_num_tokens, seq_len)), PREFILL_POINTS)
        ttft = [t * model.corrections.prefill
                for t in _mixed_prefill_ms(model, plan, isl, workload_isl, osl)]
    contexts = _grid(1.0, float(seq_len), DECODE_CONTEXT_POINTS)
    kv_tokens = _grid(0.0, float(decode.max_batch * seq_len), DECODE_KV_POINTS)
    itl = [[model.decode_step_ms(decode.tp, _batch(kv, ctx, decode.max_batch), round(ctx))
            * decode_scale for ctx in contexts] for kv in kv_tokens]
    return ProfileTables(isl, ttft, kv_tokens, contexts, itl)


def _mixed_prefill_ms(model: PerfModel, plan: Candidate, tokens: list[float],
                      isl: int, osl: int) -> list[float]:
    """What prompt tokens add to an aggregated step: the mocker charges a mixed step its
    prefill plus its decode, so the prefill table holds the mixed step (AIConfigurator's
    `run_mixed` at the planned batch) less the plain decode step."""
    pool = plan.pool(PoolRole.AGG)
    decoding = max(1, round(plan.prediction.concurrency_per_worker))
    decode = model.decode_step_ms(pool.tp, decoding, isl + osl // 2)
    return [max(0.0, model.mixed_step_ms(pool.tp, max(1, round(n)), decoding, isl, osl)
                - decode) for n in tokens]


def _prefill_step_ms(model: PerfModel, tp: int, tokens: float, isl: int) -> float:
    """A step of `tokens` prompt tokens. The mocker knows only the token count; beyond one
    prompt, the plan's steps hold whole prompts of the workload's length, whose attention
    costs less than one prompt of the same total length would."""
    if tokens <= isl:
        return model.prefill_ms(tp, 1, max(1, round(tokens)))
    prompts = max(1, round(tokens / isl))
    return model.prefill_ms(tp, prompts, isl) * tokens / (prompts * isl)


def _batch(kv_tokens: float, context: float, max_batch: int) -> int:
    # Grid points with more sequences than the worker may hold are never looked up.
    return min(max_batch, max(1, round(kv_tokens / context)))


def write_profile(tables: ProfileTables, path: Path) -> Path:
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, prefill_isl=np.array(tables.prefill_isl),
             prefill_ttft_ms=np.array(tables.prefill_ttft_ms),
             decode_active_kv_tokens=np.array(tables.decode_active_kv_tokens),
             decode_context_length=np.array(tables.decode_context_length),
             decode_itl=np.array(tables.decode_itl))
    return path
