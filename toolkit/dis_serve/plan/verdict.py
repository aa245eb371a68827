"""Whether disaggregation pays, with the uncertainty the model's measured errors leave.

The margin is the best disaggregated deployment against the best aggregated one, like with
like: for a GPU budget, tokens/s per GPU used (d / a - 1); for a rate, the GPUs it saves
((a - d) / a); negative where aggregated serving is ahead. Each mode's prediction carries the
error of the measured cases nearest it (`model_error`); the margin rests on their ratio, so
it may be off by their root-sum-square, in the margin's own unit. Where the margin is
inside that, the data cannot call it: the plan says so, and gives the `dis-serve compare`
run of the two emitted topologies that settles it on the user's own GPUs."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path

from ..bench.scenario import Scenario
from ..topology import Mode, PoolRole
from .ledger import read_ledger
from .model_error import (
    MeasuredCase,
    ModeError,
    Point,
    builtin_cases,
    ledger_cases,
    mode_error,
    slope,
)
from .recommend import PlanResult
from .replay import in_flight, requests_for_steady_state
from .request import Objective
from .search import Candidate

# Runs per arm of the settling comparison: enough for compare's run-to-run spread.
COMPARE_REPEATS = 3


@dataclass(frozen=True)
class Uncertainty:
    margin: float | None
    """Disaggregated against aggregated, as a share (None: only one mode meets the SLA)."""
    basis: str
    errors: tuple[ModeError, ...]
    model_error: float | None
    """How far the margin may be off, in its own unit (None: a mode was never measured)."""

    @property
    def too_close_to_call(self) -> bool:
        return self.margin is not None and (
            self.model_error is None or abs(self.margin) <= self.model_error)


def point_of(result: PlanResult, cand: Candidate) -> Point:
    """A deployment as the measured cases are compared (the decode pool's TP for a
    disaggregated one: decoding sets its tokens/s per GPU)."""
    request, workload = result.request, result.workload
    pool = cand.pool(PoolRole.AGG if cand.mode is Mode.AGG else PoolRole.DECODE)
    return Point(mode=cand.mode, model=request.target().name, gpu=request.gpu.value,
                 dtype=request.dtype.value, tp=pool.tp, isl=workload.isl, osl=workload.osl,
                 itl_ms=cand.prediction.itl_ms,
                 arrival="offline" if workload.closed_loop else "poisson",
                 performance_model=result.model.source.value)


def uncertainty(result: PlanResult, cases: list[MeasuredCase] | None = None) -> Uncertainty:
    """The plan's margin and the error around it, from the built-in measured cases and the
    ledger's (`cases` replaces both)."""
    request, agg, disagg = result.request, result.best_agg, result.best_disagg
    basis = "GPUs saved" if request.objective is Objective.FEWEST_GPUS else "tokens/s per GPU"
    if agg is None or disagg is None:
        return Uncertainty(None, basis, (), None)
    if cases is None:
        cases = [*builtin_cases(), *ledger_cases(read_ledger())]
    per_unit = slope([c for c in cases if c.point.mode is Mode.AGG])
    errors = tuple(e for cand in (agg, disagg)
                   if (e := mode_error(point_of(result, cand), cases, per_unit)) is not None)
    if request.objective is Objective.FEWEST_GPUS:
        ratio = disagg.gpus / agg.gpus  # lower is better for disaggregation
        margin = 1.0 - ratio
    else:
        ratio = disagg.tokens_per_s_per_gpu / agg.tokens_per_s_per_gpu
        margin = ratio - 1.0
    model_error = (ratio * math.hypot(*(e.error for e in errors)) if len(errors) == 2
                   else None)
    return Uncertainty(margin, basis, errors, model_error)


def settling_scenario(result: PlanResult, name: str) -> Scenario:
    """The workload and SLA of the plan as a `bench` scenario, swept at the load each mode
    was planned for: at the higher one the weaker side runs out of headroom, which is what
    the comparison measures."""
    workload, request = result.workload, result.request
    sides = [c for c in (result.best_agg, result.best_disagg) if c is not None]
    spec: dict = {"name": name, "sla": {"ttft_ms": request.ttft_ms, "itl_ms": request.itl_ms},
                  "description": f"Settles the plan's verdict: {result.request.target().name} "
                                 f"at {workload.isl}/{workload.osl} tokens under its SLA."}
    if workload.trace is not None:
        return Scenario.model_validate(spec | {"trace": {
            "file": str(workload.trace.path.resolve()), "block_size": workload.trace.block_size}})
    spec |= {"input_tokens": {"mean": workload.isl}, "output_tokens": {"mean": workload.osl},
             "requests": max(requests_for_steady_state(c) for c in sides)}
    if workload.closed_loop:
        spec["concurrency"] = sorted({in_flight(c, c.rate) for c in sides})
    else:
        spec["request_rate"] = sorted({round(c.rate, 2) for c in sides})
    spec["warmup_requests"] = max(in_flight(c, c.rate) for c in sides)
    return Scenario.model_validate(spec)


def compare_command(agg_topology: Path, disagg_topology: Path, scenario: Path) -> str:
    return shlex.join(["dis-serve", "compare", str(agg_topology), str(disagg_topology),
                       "--scenario", str(scenario), "--repeat", str(COMPARE_REPEATS)])


def _share(value: float) -> str:
    return f"{value:+.0%}"


def sentence(found: Uncertainty, command: str | None) -> str:
    """The verdict's uncertainty in one or two sentences."""
    if found.margin is None:
        return "Only one mode meets the SLA here: there is no margin to weigh."
    by_mode = "; ".join(
        f"{e.mode.value} +-{e.error:.0%}, its nearest measured case "
        + ("at the plan" if e.distance == 0 else f"{e.distance:.1f} units away")
        for e in found.errors)
    if found.model_error is None:
        missing = {Mode.AGG, Mode.DISAGG} - {e.mode for e in found.errors}
        error = (f"no measured case of {', '.join(sorted(m.value for m in missing))} serving "
                 "to weigh it against")
    else:
        error = (f"the model's measured error +-{found.model_error:.0%} ({by_mode}; the cases "
                 "in plan.json)")
    margin = f"margin {_share(found.margin)} {found.basis} (disaggregated against aggregated)"
    if not found.too_close_to_call:
        return f"The {margin} is outside {error}."
    settle = f" Settle it on your GPUs: {command}" if command else ""
    return f"Too close to call from data; measure it: the {margin} is inside {error}.{settle}"
