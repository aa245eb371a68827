"""`plan` end to end: search, write the topologies and the mocker's timing tables, replay the
plan in Dynamo's simulator, draw the Pareto plot and write `plan.json`.

`run_plan(request, out_dir) -> PlanOutcome`, the same shape as `bench`'s runner: the CLI
parses flags into a `PlanRequest`, calls this and prints the outcome."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from ..evidence.fingerprint import capture, write_fingerprint
from ..topology import Mode
from .emit import (
    PLAN_FILE,
    PLAN_HEADER,
    graph_name,
    placement_note,
    plan_topology,
    write_topology,
)
from .ledger import recorded_error
from .mocker_profile import profile_tables, write_profile
from .outcome import PlanOutcome, Replay, Verdict
from .plots import pareto_png
from .recommend import PlanResult, make_plan
from .replay import replay_plan
from .request import PlanRequest
from .search import Candidate
from .to_outcome import plan_outcome, replay_summary, verdict_info
from .verdict import compare_command, settling_scenario, uncertainty
from .verify import Attempt, Verification, closeness, replay_failure, verified

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
        replays.append(replay_summary("plan", result.chosen, plan_attempt.replay,
                                      plan_attempt.failure))
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
    verdict = _verdict(result, out_dir, files)
    files["plan.json"] = out_dir / PLAN_FILE
    outcome = plan_outcome(result, replays, files, checks,
                           emit_refused=refused if emit is not None else None, verdict=verdict)
    outcome = outcome.model_copy(update={"measured_error": recorded_error(outcome)})
    files["plan.json"].write_text(outcome.model_dump_json(indent=2) + "\n")
    return outcome


def _attempt_of(cand: Candidate, checks: dict[Mode, Verification]) -> Attempt | None:
    check = checks.get(cand.mode)
    return None if check is None else next(
        (a for a in check.attempts if a.candidate is cand), None)


def _refusal(result: PlanResult, failed: Attempt, checks: dict[Mode, Verification]) -> str:
    closest = max((c.best for c in checks.values()), key=closeness)
    return (f"the plan ({result.chosen.label}) {failed.failure}, and no deployment the "
            f"planner replayed passed (the closest: {closest.candidate.label} at "
            f"{closest.candidate.rate:.2f} req/s, {closest.replay.sla_met_share:.0%} met the "
            f"SLA, {closest.replay.served_rate:.2f} req/s served)")


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
    header = (f"{PLAN_HEADER}{out_dir / PLAN_FILE}\n"
              f"Planned by `dis-serve plan` with {result.model.source.value}: "
              f"{chosen.label}.\nPredicted: {chosen.rate:.2f} req/s, p90 TTFT "
              f"{chosen.prediction.ttft_p90_ms:.0f} ms, p90 ITL "
              f"{chosen.prediction.itl_p90_ms:.1f} ms.")
    if attempt is not None:
        header += (f"\nReplayed in Dynamo's simulator: {attempt.replay.sla_met_share:.0%} of "
                   "requests met the SLA.")
    note = placement_note(chosen, request)
    return {
        "topology (trtllm)": write_topology(plan_topology(chosen, request, result.workload),
                                            out_dir / "topology.yaml",
                                            header + (f"\n{note}" if note else "")),
        "topology (mocker)": write_topology(
            plan_topology(chosen, request, result.workload, mock=True, profile=profile),
            out_dir / "topology-mock.yaml",
            header + "\nThe mocker times itself from mocker-profile.npz (the same model)."),
        "mocker profile": profile,
    }


def _verdict(result: PlanResult, out_dir: Path, files: dict[str, Path]) -> Verdict:
    """The verdict with its uncertainty; with both modes, their best deployments as trtllm
    topologies and the plan's workload as a scenario, for the comparison that settles it."""
    found = uncertainty(result)
    sides = {c.mode: c for c in (result.best_agg, result.best_disagg) if c is not None}
    if len(sides) < 2:
        return verdict_info(result, found, {}, None, None)
    request, topologies = result.request, {}
    for mode, cand in sides.items():
        header = (f"The best {mode.value} deployment of the plan {out_dir / PLAN_FILE} "
                  f"({cand.label}), for the comparison that settles its verdict.")
        topologies[mode] = write_topology(plan_topology(cand, request, result.workload),
                                          out_dir / f"topology-{mode.value}.yaml", header)
        files[f"topology ({mode.value}, trtllm)"] = topologies[mode]
    scenario = out_dir / "scenario.yaml"
    spec = settling_scenario(result, graph_name(request, result.chosen, False))
    scenario.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True),
                                       sort_keys=False))
    files["scenario (settles the verdict)"] = scenario
    command = compare_command(topologies[Mode.AGG], topologies[Mode.DISAGG], scenario)
    return verdict_info(result, found, topologies, scenario, command)


def _replay_split(result: PlanResult, out_dir: Path) -> Replay:
    request, split = result.request, result.split
    assert split is not None
    profile = write_profile(
        profile_tables(result.model, split, result.workload.isl, result.space.seq_len),
        out_dir / "replays" / "mocker-profile-split.npz")
    replayed = replay_plan(request.target(), split, profile, result.workload,
                           ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                           requests=request.replay_requests,
                           gpus_per_node=request.gpus_per_node, sla_share=request.sla_share)
    return replay_summary("split", split, replayed,
                          replay_failure(split, replayed, result.workload))
