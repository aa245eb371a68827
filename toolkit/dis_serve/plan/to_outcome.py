"""The search's candidates and the replay's results as `PlanOutcome`'s models (what
`plan.json` holds), with the title and the sentences saying how the replay agrees with the
prediction. Conversion only: the CLI draws the tables (no Rich here)."""

from __future__ import annotations

from pathlib import Path

from ..topology import Mode
from .emit import placement_note
from .outcome import (
    Deployment,
    ModeErrorInfo,
    PerformanceModelInfo,
    PlannedPool,
    PlanOutcome,
    Replay,
    SavingsInfo,
    Verdict,
    VerificationStep,
    WorkloadInfo,
)
from .pricing import yearly_cost
from .recommend import PlanResult
from .replay import ReplayResult
from .request import Objective
from .search import Candidate
from .verdict import Uncertainty, sentence
from .verify import Verification

# Where a replayed figure differs from the prediction by more than this, the report names it.
NOTABLE_GAP = 0.10


def short_label(cand: Candidate) -> str:
    """`P 14xTP2 b1 + D 5xTP4 b140`: role initial, workers x TP, max batch."""
    return " + ".join(f"{p.role.value[0].upper()} {p.workers}xTP{p.tp} b{p.max_batch}"
                      for p in cand.pools)


def plan_title(result: PlanResult) -> str:
    req, wl = result.request, result.workload
    goal = (f"{wl.rate:.3g} req/s on the fewest GPUs" if req.objective is Objective.FEWEST_GPUS
            else f"most goodput from {req.budget} GPUs")
    lengths = f"ISL {wl.isl} / OSL {wl.osl}" + (
        f" (trace {wl.trace.path.name})" if wl.trace
        else " (offline: closed loop)" if wl.closed_loop else "")
    return (f"{req.target().name} on {req.gpu.value} (trtllm, {req.dtype.value}), {lengths}, "
            f"{goal}; SLA: p{req.sla_percentile:g} TTFT <= {req.ttft_ms:g} ms, "
            f"p{req.sla_percentile:g} ITL <= {req.itl_ms:g} ms")


def deployment(cand: Candidate) -> Deployment:
    pred = cand.prediction
    return Deployment(
        mode=cand.mode, gpus=cand.gpus, label=cand.label, short_label=short_label(cand),
        pools=[PlannedPool(role=p.role, **p.spec.model_dump(exclude_unset=True))
               for p in cand.pools],
        requests_per_s=cand.rate, tokens_per_s=cand.tokens_per_s,
        tokens_per_s_per_gpu=cand.tokens_per_s_per_gpu,
        tokens_per_s_per_user=cand.tokens_per_s_per_user,
        ttft_mean_ms=pred.ttft_mean_ms, ttft_p90_ms=pred.ttft_p90_ms,
        itl_mean_ms=pred.itl_ms, itl_p90_ms=pred.itl_p90_ms,
        ttft_tail_ms=pred.ttft_tail_ms, itl_tail_ms=pred.itl_tail_ms,
        runs_out_first=cand.limit)


def replay_summary(name: str, cand: Candidate, rep: ReplayResult,
                   failure: str | None) -> Replay:
    """The outcome's record of one replay; `failure` says why it failed the deployment
    (`verify.replay_failure`), None when it held."""
    return Replay(
        deployment=name, replayed=rep.replayed, requests=rep.requests,
        measured_requests=rep.measured_requests,
        steady=rep.steady, ttft_mean_ms=rep.ttft_mean_ms,
        ttft_p90_ms=rep.ttft_p90_ms, itl_mean_ms=rep.itl_mean_ms,
        itl_p90_ms=rep.itl_p90_ms, ttft_tail_ms=rep.ttft_tail_ms, itl_tail_ms=rep.itl_tail_ms,
        requests_per_s=rep.served_rate,
        output_tokens_per_s=rep.output_tokens_per_s,
        sla_met_share=rep.sla_met_share, passed=failure is None, failed_because=failure,
        wall_s=rep.wall_s,
        worst_difference_means=worst_difference(cand, rep),
        worst_difference_p90=worst_difference(cand, rep, tails=True),
        agreement=_agreement(name, cand, rep))


def worst_difference(cand: Candidate, rep: ReplayResult, *, tails: bool = False) -> float:
    """Largest relative gap over mean TTFT, mean ITL and throughput (with `tails`: over the
    90th percentiles instead)."""
    pred = cand.prediction
    if tails:
        pairs = ((rep.ttft_p90_ms, pred.ttft_p90_ms), (rep.itl_p90_ms, pred.itl_p90_ms))
    else:
        pairs = ((rep.ttft_mean_ms, pred.ttft_mean_ms), (rep.itl_mean_ms, pred.itl_ms),
                 (rep.served_rate, cand.rate))
    return max(abs(r / p - 1) for r, p in pairs if p)


def _gaps(cand: Candidate, rep: ReplayResult) -> list[tuple[str, float]]:
    pred = cand.prediction
    pairs = (("mean TTFT", rep.ttft_mean_ms, pred.ttft_mean_ms),
             ("p90 TTFT", rep.ttft_p90_ms, pred.ttft_p90_ms),
             ("mean ITL", rep.itl_mean_ms, pred.itl_ms),
             ("p90 ITL", rep.itl_p90_ms, pred.itl_p90_ms),
             ("throughput", rep.served_rate, cand.rate))
    return [(name, r / p - 1) for name, r, p in pairs if p]


def _agreement(name: str, cand: Candidate, rep: ReplayResult) -> str:
    means, tails = worst_difference(cand, rep), worst_difference(cand, rep, tails=True)
    text = (f"{name}: replayed {rep.replayed}; {rep.measured_requests} of {rep.requests} "
            f"requests measured in {rep.wall_s:.1f} s; mean TTFT, ITL and throughput within "
            f"{means:.0%} of the prediction, 90th percentiles within {tails:.0%}.")
    if not rep.steady:
        return text + (" The run was too short for a steady state, so the figures cover "
                       "every request, warm-up included, and the gaps say little.")
    metric, gap = max(_gaps(cand, rep), key=lambda g: abs(g[1]))
    if abs(gap) > NOTABLE_GAP:
        side = "more" if gap > 0 else "less"
        text += (f" The largest gap, {metric} ({gap:+.0%}: the replay saw {side}), is where "
                 "the prediction's closed-form estimates of the router and batchers differ "
                 "from the replay, which runs them event by event on the same step-time "
                 "tables; where they differ, trust the replay.")
    return text


def verdict_info(result: PlanResult, found: Uncertainty, topologies: dict[Mode, Path],
                 scenario: Path | None, command: str | None) -> Verdict:
    """The verdict `plan.json` holds: the decision, its margin, the error around it and how
    to settle it."""
    return Verdict(
        disaggregation_pays=result.disagg_pays, sentence=result.verdict, margin=found.margin,
        margin_of=found.basis, model_error=found.model_error,
        mode_errors=[ModeErrorInfo(mode=e.mode, error=e.error, distance=e.distance,
                                   nearest=[c.source for c in e.nearest])
                     for e in found.errors],
        too_close_to_call=found.too_close_to_call, uncertainty=sentence(found, command),
        compare_command=command,
        topologies={mode.value: str(path) for mode, path in topologies.items()},
        scenario=None if scenario is None else str(scenario))


def plan_outcome(result: PlanResult, replays: list[Replay], files: dict[str, Path],
                 checks: dict[Mode, Verification], emit_refused: str | None,
                 verdict: Verdict) -> PlanOutcome:
    """Everything `plan.json` holds, from the search's result and what the replay saw."""
    request, model, savings = result.request, result.model, result.savings
    steps = [VerificationStep(mode=mode, deployment=a.candidate.label, gpus=a.candidate.gpus,
                              requests_per_s=a.candidate.rate,
                              tokens_per_s_per_gpu=a.candidate.tokens_per_s_per_gpu,
                              sla_met_share=a.replay.sla_met_share,
                              served_per_s=a.replay.served_rate, passed=a.passed,
                              failed_because=a.failure)
             for mode, check in checks.items() for a in check.attempts]
    return PlanOutcome(
        request=request, title=plan_title(result),
        workload=WorkloadInfo(isl=result.workload.isl, osl=result.workload.osl,
                              rate=result.workload.rate),
        performance_model=PerformanceModelInfo(source=model.source.value, detail=model.detail,
                                               fallback_reason=model.fallback_reason),
        calibration=result.calibration, plan=deployment(result.chosen),
        plan_yearly_usd=round(yearly_cost(result.chosen.gpus, request.hourly_price)),
        disaggregation_pays=result.disagg_pays, verdict=verdict,
        savings=None if savings is None else SavingsInfo(
            gpus=savings.gpus, agg_gpus=savings.agg_gpus, share=round(savings.share, 4),
            yearly_usd=round(savings.yearly_usd), price_per_gpu_hour=request.hourly_price),
        top_disaggregated=[deployment(c) for c in result.disagg[:request.top]],
        top_aggregated=[deployment(c) for c in result.agg[:request.top]],
        split=None if result.split is None else deployment(result.split),
        split_gpus=result.split_gpus, replay=replays, verification=steps,
        emit_refused=emit_refused,
        placement_note=placement_note(result.chosen, request),
        planning_seconds=round(result.seconds, 3),
        files={what: str(path) for what, path in files.items()})
