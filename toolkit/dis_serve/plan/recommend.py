"""The recommendation: request -> performance model -> search -> the plan, whether
disaggregation pays (the verdict) and what it saves against aggregated serving."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from ..errors import UserInputError
from ..topology import Mode
from .aiconfigurator_model import AiconfiguratorUnavailable
from .calibration import fit_calibration, read_measurements
from .model_choice import choose_perf_model
from .outcome import Calibration
from .perf_model import PerfModel, PerfSource
from .pricing import Savings
from .request import Objective, PlanRequest, Workload
from .search import (
    Candidate,
    SearchSpace,
    best_for_split,
    build_space,
    fewest_gpus,
    most_goodput,
    rank,
)

# Disaggregation adds a KV-transfer network and a second pool to run; recommend it only when
# it beats aggregated serving by at least this much (GPUs for a rate, or goodput).
PAYS_MARGIN = 0.05
# Below this many GPUs, splitting into two pools strands capacity in one of them.
SMALL_CLUSTER_GPUS = 12
# An aggregated worker that spends less than this share of its time in prefill gains
# little from moving prefill elsewhere.
SHORT_PROMPT_PREFILL_SHARE = 0.15


@dataclass
class PlanResult:
    request: PlanRequest
    workload: Workload
    model: PerfModel
    space: SearchSpace
    candidates: list[Candidate]
    """Every shape the search kept (for the Pareto plot)."""
    disagg: list[Candidate]
    agg: list[Candidate]
    chosen: Candidate
    disagg_pays: bool
    verdict: str
    savings: Savings | None
    split: Candidate | None
    split_gpus: tuple[int, int] | None
    seconds: float
    calibration: Calibration | None = None

    @property
    def best_agg(self) -> Candidate | None:
        return self.agg[0] if self.agg else None

    @property
    def best_disagg(self) -> Candidate | None:
        return self.disagg[0] if self.disagg else None


def make_plan(request: PlanRequest) -> PlanResult:
    started = time.perf_counter()
    workload = Workload.of(request)
    model = choose_perf_model(request.target(), request.perf_model)
    if request.perf_model is PerfSource.AICONFIGURATOR and model.source is PerfSource.ROOFLINE:
        raise UserInputError(f"AIConfigurator cannot answer: {model.fallback_reason}",
                             key="perf_model", fix="drop `perf_model` to use the roofline")
    calibration = None
    if request.calibrate:
        calibration = fit_calibration(model, read_measurements(list(request.calibrate),
                                                               request.target()),
                                      request.gpus_per_node)
        model.calibrate(calibration.prefill, calibration.decode, calibration.kv_transfer or 1.0)
    space = _space(model, request, workload)
    if request.budget is not None and request.budget < min(space.tps):
        tp = min(space.tps)
        raise UserInputError(
            f"a budget of {request.budget} GPU(s) cannot hold one {space.model.target.name} "
            f"worker in {request.dtype.value} on {request.gpu.value}: it needs TP{tp}",
            key="budget", fix=f"use `budget` {tp} or more, or a smaller `dtype` (fp8, awq)")
    if request.objective is Objective.FEWEST_GPUS:
        assert workload.rate is not None
        found = fewest_gpus(space, workload.rate)
    else:
        assert request.budget is not None
        found = most_goodput(space, request.budget)
    ranked = rank(found, request.objective)
    if not ranked:
        raise _nothing_fits(space, request, workload)
    disagg = [c for c in ranked if c.mode is Mode.DISAGG]
    agg = [c for c in ranked if c.mode is Mode.AGG]
    split = request.compare_split
    split_plan = best_for_split(space, *split) if split else None
    undecided = PlanResult(request, workload, space.model, space, found, disagg, agg,
                           ranked[0], False, "", None, split_plan, split,
                           time.perf_counter() - started, calibration)
    return decide(undecided, disagg, agg)


def decide(result: PlanResult, disagg: list[Candidate], agg: list[Candidate]) -> PlanResult:
    """The plan between the best of each mode (as ranked, or as the replay confirmed them):
    disaggregated only when it pays, with what it saves."""
    request = result.request
    pays, verdict = _verdict(request, disagg, agg)
    chosen = disagg[0] if pays or not agg else agg[0]
    savings = (_savings(result.space, request, chosen, agg) if chosen.mode is Mode.DISAGG
               else None)
    return replace(result, disagg=disagg, agg=agg, chosen=chosen, disagg_pays=pays,
                   verdict=verdict, savings=savings)


def _space(model: PerfModel, request: PlanRequest, workload: Workload) -> SearchSpace:
    try:
        return build_space(model, request, workload)
    except AiconfiguratorUnavailable as exc:
        # A data gap at one point (a length or batch its tables do not cover) sends the
        # whole plan to the roofline, so one plan never mixes two models.
        if request.perf_model is PerfSource.AICONFIGURATOR:
            raise UserInputError(str(exc), key="perf_model",
                                 fix="drop `perf_model` to use the roofline") from None
        fallback = choose_perf_model(request.target(), PerfSource.ROOFLINE, reason=str(exc))
        fallback.calibrate(model.measured.prefill, model.measured.decode,
                           model.kv_transfer_scale)
        return build_space(fallback, request, workload)


def _nothing_fits(space: SearchSpace, request: PlanRequest, workload: Workload) -> Exception:
    smallest = rank(fewest_gpus(space, 1e-3), Objective.FEWEST_GPUS)
    if request.objective is Objective.MOST_GOODPUT:
        if smallest:
            need = smallest[0]
            return UserInputError(
                f"nothing within {request.budget} GPUs meets p90 TTFT {request.ttft_ms:g} ms "
                f"and ITL {request.itl_ms:g} ms; the smallest deployment that does needs "
                f"{need.gpus} GPUs ({need.label})", key="budget",
                fix=f"use `budget` {need.gpus} or more, or relax the SLA")
        return UserInputError(
            f"no deployment meets p90 TTFT {request.ttft_ms:g} ms and ITL "
            f"{request.itl_ms:g} ms for this workload", key="ttft_ms",
            fix="relax `ttft_ms` / `itl_ms`")
    return UserInputError(
        f"{workload.rate:g} requests/s under this SLA needs more than the 4096 GPUs the "
        "planner considers", key="rate", fix="lower `rate` or split the traffic")


def _verdict(request: PlanRequest, disagg: list[Candidate],
             agg: list[Candidate]) -> tuple[bool, str]:
    if not disagg:
        return False, ("Disaggregation does not pay here: no disaggregated deployment meets "
                       "the SLA within the budget (it needs a prefill and a decode worker).")
    if not agg:
        return True, "Only disaggregated deployments meet the SLA here."
    d, a = disagg[0], agg[0]
    if request.objective is Objective.FEWEST_GPUS:
        gain = (a.gpus - d.gpus) / a.gpus
        fewer = a.gpus - d.gpus
        ahead = (f"{fewer} fewer GPU{'s' * (fewer != 1)} ({gain:.0%})" if fewer >= 0
                 else f"{-fewer} more GPU{'s' * (fewer != -1)} ({-gain:.0%})")
    else:
        # Like with like: either may leave part of the budget unused, so compare what each
        # GPU it uses serves.
        gain = d.tokens_per_s_per_gpu / a.tokens_per_s_per_gpu - 1
        ahead = f"{gain:+.0%} tokens/s per GPU"
    if gain >= PAYS_MARGIN:
        return True, (f"Disaggregation pays: {ahead} against the best aggregated deployment "
                      f"({a.label}).")
    reasons = []
    share = a.prediction.prefill_utilization
    if share < SHORT_PROMPT_PREFILL_SHARE:
        reasons.append(f"prompts are short: prefill takes only {share:.0%} of an aggregated "
                       "worker's time, too little for a pool of its own")
    gpus = request.budget or a.gpus
    if gpus < SMALL_CLUSTER_GPUS:
        reasons.append(f"{gpus} GPUs are too few to split into prefill and decode pools "
                       "without stranding capacity in one of them")
    if not reasons:
        reasons.append(f"the best disaggregated deployment ({d.label}) needs {ahead}, short "
                       f"of the {PAYS_MARGIN:.0%} gain that repays a second pool and a "
                       "KV-transfer network" if request.objective is Objective.FEWEST_GPUS
                       else f"the best disaggregated deployment ({d.label}) gives {ahead}, "
                       f"short of the {PAYS_MARGIN:.0%} gain that repays a second pool and a "
                       "KV-transfer network")
    return False, "Disaggregation does not pay here: " + "; ".join(reasons) + "."


def _savings(space: SearchSpace, request: PlanRequest, chosen: Candidate,
             agg: list[Candidate]) -> Savings | None:
    """GPUs the best aggregated deployment needs for the plan's goodput, against the plan."""
    if request.objective is Objective.FEWEST_GPUS:
        agg_gpus = agg[0].gpus if agg else None
    else:
        same_rate = [c for c in rank(fewest_gpus(space, chosen.rate), Objective.FEWEST_GPUS)
                     if c.mode is Mode.AGG]
        agg_gpus = same_rate[0].gpus if same_rate else None
    if agg_gpus is None:
        return None
    return Savings(chosen.gpus, agg_gpus, request.hourly_price)
