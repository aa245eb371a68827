"""`plan` end to end: search, write the topologies and the mocker's timing tables, replay the
plan in Dynamo's simulator, draw the Pareto plot and write `plan.json`.

`run_plan(request, out_dir) -> PlanOutcome`, the same shape as `bench`'s runner: the CLI
parses flags into a `PlanRequest`, calls this and prints the outcome."""

from __future__ import annotations

import shutil
from pathlib import Path

from ..evidence.fingerprint import capture, write_fingerprint
from ..topology import Mode
from .emit import graph_name, plan_topology, write_topology
from .mocker_profile import profile_tables, write_profile
from .outcome import (
    PerformanceModelInfo,
    PlanOutcome,
    Replay,
    SavingsInfo,
    VerificationStep,
    WorkloadInfo,
)
from .planner import PlanResult, make_plan
from .plots import pareto_png
from .pricing import yearly_cost
from .replay import replay_plan
from .report import deployment, plan_title, replay_summary
from .request import PlanRequest
from .search import SLA_SHARE, Candidate
from .verify import Attempt, Verification, verified

DEFAULT_PLANS_DIR = Path(".dis-serve/plans")


def run_plan(request: PlanRequest, out_dir: Path | None = None, *, emit: Path | None = None,
             emit_mock: bool = False, force_emit: bool = False) -> PlanOutcome:
    """Plan, verify in the replay and write everything into `out_dir` (default
    `.dis-serve/plans/NAME`); with `emit`, also copy the trtllm topology (the mocker one with
    `emit_mock`) there, unless the plan failed its replay and `force_emit` is off."""
    result = make_plan(request)
    out_dir = (out_dir or DEFAULT_PLANS_DIR / graph_name(request, result.chosen, False)).resolve()
    write_fingerprint(out_dir, capture("plan", {}, inputs=request))
    checks: dict[Mode, Verification] = {}
    if request.replay:
        result, checks = verified(result, out_dir / "replays")
    plan_attempt = _attempt_of(result.chosen, checks)
    files = _write_topologies(result, out_dir, plan_attempt)
    replays = []
    if plan_attempt is not None:
        replays.append(replay_summary("plan", result.chosen, plan_attempt.replay))
    if request.replay and result.split is not None:
        replays.append(_replay_split(result, out_dir))
    files["Pareto plot"] = pareto_png(result, out_dir / "pareto.png")
    if result.calibration is not None:
        files["calibration"] = out_dir / "calibration.json"
        files["calibration"].write_text(result.calibration.model_dump_json(indent=2) + "\n")
    refused = None if plan_attempt is None or plan_attempt.passed or force_emit else (
        _refusal(result, plan_attempt, checks))
    if emit is not None and refused is None:
        chosen_file = files["topology (mocker)" if emit_mock else "topology (trtllm)"]
        emit.parent.mkdir(parents=True, exist_ok=True)
        emit.write_text(chosen_file.read_text())
        files["emitted topology"] = emit.resolve()
    files["plan.json"] = out_dir / "plan.json"
    outcome = _outcome(result, replays, files, checks,
                       emit_refused=refused if emit is not None else None)
    files["plan.json"].write_text(outcome.model_dump_json(indent=2) + "\n")
    return outcome


def _attempt_of(cand: Candidate, checks: dict[Mode, Verification]) -> Attempt | None:
    check = checks.get(cand.mode)
    return None if check is None else next(
        (a for a in check.attempts if a.candidate is cand), None)


def _refusal(result: PlanResult, failed: Attempt, checks: dict[Mode, Verification]) -> str:
    closest = max((a for c in checks.values() for a in c.attempts),
                  key=lambda a: a.replay.sla_met_share)
    return (f"the plan ({result.chosen.label}) met the SLA for "
            f"{failed.replay.sla_met_share:.0%} of replayed requests, short of the "
            f"{SLA_SHARE:.0%} it promises, and no deployment the planner replayed passed (the "
            f"closest: {closest.candidate.label} at {closest.candidate.rate:.2f} req/s, "
            f"{closest.replay.sla_met_share:.0%})")


def _write_topologies(result: PlanResult, out_dir: Path,
                      attempt: Attempt | None) -> dict[str, Path]:
    chosen, request = result.chosen, result.request
    profile = out_dir / "mocker-profile.npz"
    if attempt is not None:  # the tables the replay ran on
        profile.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(attempt.profile, profile)
    else:
        write_profile(profile_tables(result.model, chosen, result.workload.isl,
                                     result.space.seq_len), profile)
    header = (f"Planned by `dis-serve plan` with {result.model.source.value}: "
              f"{chosen.label}.\nPredicted: {chosen.rate:.2f} req/s, p90 TTFT "
              f"{chosen.prediction.ttft_p90_ms:.0f} ms, p90 ITL "
              f"{chosen.prediction.itl_p90_ms:.1f} ms.")
    if attempt is not None:
        header += (f"\nReplayed in Dynamo's simulator: {attempt.replay.sla_met_share:.0%} of "
                   "requests met the SLA.")
    return {
        "topology (trtllm)": write_topology(plan_topology(chosen, request, result.workload),
                                            out_dir / "topology.yaml", header),
        "topology (mocker)": write_topology(
            plan_topology(chosen, request, result.workload, mock=True, profile=profile),
            out_dir / "topology-mock.yaml",
            header + "\nThe mocker times itself from mocker-profile.npz (the same model)."),
        "mocker profile": profile,
    }


def _replay_split(result: PlanResult, out_dir: Path) -> Replay:
    request, split = result.request, result.split
    assert split is not None
    profile = write_profile(
        profile_tables(result.model, split, result.workload.isl, result.space.seq_len),
        out_dir / "replays" / "mocker-profile-split.npz")
    replayed = replay_plan(request.target(), split, profile, result.workload,
                           ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                           requests=request.replay_requests,
                           gpus_per_node=request.gpus_per_node)
    return replay_summary("split", split, replayed)


def _outcome(result: PlanResult, replays: list[Replay], files: dict[str, Path],
             checks: dict[Mode, Verification], emit_refused: str | None) -> PlanOutcome:
    request, model, savings = result.request, result.model, result.savings
    steps = [VerificationStep(mode=mode, deployment=a.candidate.label, gpus=a.candidate.gpus,
                              requests_per_s=a.candidate.rate,
                              tokens_per_s_per_gpu=a.candidate.tokens_per_s_per_gpu,
                              sla_met_share=a.replay.sla_met_share, passed=a.passed)
             for mode, check in checks.items() for a in check.attempts]
    return PlanOutcome(
        request=request, title=plan_title(result),
        workload=WorkloadInfo(isl=result.workload.isl, osl=result.workload.osl,
                              rate=result.workload.rate),
        performance_model=PerformanceModelInfo(source=model.source.value, detail=model.detail,
                                               fallback_reason=model.fallback_reason),
        calibration=result.calibration, plan=deployment(result.chosen),
        plan_yearly_usd=round(yearly_cost(result.chosen.gpus, request.hourly_price)),
        disaggregation_pays=result.disagg_pays, verdict=result.verdict,
        savings=None if savings is None else SavingsInfo(
            gpus=savings.gpus, agg_gpus=savings.agg_gpus, share=round(savings.share, 4),
            yearly_usd=round(savings.yearly_usd), price_per_gpu_hour=request.hourly_price),
        top_disaggregated=[deployment(c) for c in result.disagg[:request.top]],
        top_aggregated=[deployment(c) for c in result.agg[:request.top]],
        split=None if result.split is None else deployment(result.split),
        split_gpus=result.split_gpus, replay=replays, verification=steps,
        emit_refused=emit_refused,
        planning_seconds=round(result.seconds, 3),
        files={what: str(path) for what, path in files.items()})
