"""`plan` end to end: search, write the topologies and the mocker's timing tables, replay the
plan in Dynamo's simulator, draw the Pareto plot and write `plan.json`.

`run_plan(request, out_dir) -> PlanOutcome`, the same shape as `bench`'s runner: the CLI
parses flags into a `PlanRequest`, calls this and prints the outcome."""

from __future__ import annotations

from pathlib import Path

from .emit import graph_name, plan_topology, write_topology
from .mocker_profile import profile_tables, write_profile
from .outcome import (
    PerformanceModelInfo,
    PlanOutcome,
    Replay,
    SavingsInfo,
    WorkloadInfo,
)
from .planner import PlanResult, make_plan
from .plots import pareto_png
from .pricing import yearly_cost
from .replay import replay_plan
from .report import deployment, plan_title, replay_summary
from .request import PlanRequest
from .search import Candidate

DEFAULT_PLANS_DIR = Path(".dis-serve/plans")


def run_plan(request: PlanRequest, out_dir: Path | None = None, *, emit: Path | None = None,
             emit_mock: bool = False) -> PlanOutcome:
    """Plan, check and write everything into `out_dir` (default `.dis-serve/plans/NAME`);
    with `emit`, also copy the trtllm topology (the mocker one with `emit_mock`) there."""
    result = make_plan(request)
    out_dir = (out_dir or DEFAULT_PLANS_DIR / graph_name(request, result.chosen, False)).resolve()
    files = _write_topologies(result, out_dir)
    replays = _replays(result, out_dir, files["mocker profile"]) if request.replay else []
    files["Pareto plot"] = pareto_png(result, out_dir / "pareto.png")
    if emit is not None:
        chosen_file = files["topology (mocker)" if emit_mock else "topology (trtllm)"]
        emit.parent.mkdir(parents=True, exist_ok=True)
        emit.write_text(chosen_file.read_text())
        files["emitted topology"] = emit.resolve()
    files["plan.json"] = out_dir / "plan.json"
    outcome = _outcome(result, replays, files)
    files["plan.json"].write_text(outcome.model_dump_json(indent=2) + "\n")
    return outcome


def _write_topologies(result: PlanResult, out_dir: Path) -> dict[str, Path]:
    chosen, request = result.chosen, result.request
    profile = write_profile(
        profile_tables(result.model, chosen, result.workload.isl, result.space.seq_len),
        out_dir / "mocker-profile.npz")
    header = (f"Planned by `dis-serve plan` with {result.model.source.value}: "
              f"{chosen.label}.\nPredicted: {chosen.rate:.2f} req/s, p90 TTFT "
              f"{chosen.prediction.ttft_p90_ms:.0f} ms, p90 ITL "
              f"{chosen.prediction.itl_p90_ms:.1f} ms.")
    return {
        "topology (trtllm)": write_topology(plan_topology(chosen, request, result.workload),
                                            out_dir / "topology.yaml", header),
        "topology (mocker)": write_topology(
            plan_topology(chosen, request, result.workload, mock=True, profile=profile),
            out_dir / "topology-mock.yaml",
            header + "\nThe mocker times itself from mocker-profile.npz (the same model)."),
        "mocker profile": profile,
    }


def _replays(result: PlanResult, out_dir: Path, profile: Path) -> list[Replay]:
    request = result.request
    checks: list[tuple[str, Candidate]] = [("plan", result.chosen)]
    if result.split is not None:
        checks.append(("split", result.split))
    out = []
    for name, cand in checks:
        cand_profile = profile if cand is result.chosen else write_profile(
            profile_tables(result.model, cand, result.workload.isl, result.space.seq_len),
            out_dir / f"mocker-profile-{name}.npz")
        replayed = replay_plan(request.target(), cand, cand_profile, result.workload,
                               ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                               requests=request.replay_requests,
                               gpus_per_node=request.gpus_per_node)
        out.append(replay_summary(name, cand, replayed))
    return out


def _outcome(result: PlanResult, replays: list[Replay], files: dict[str, Path]) -> PlanOutcome:
    request, model, savings = result.request, result.model, result.savings
    return PlanOutcome(
        request=request, title=plan_title(result),
        workload=WorkloadInfo(isl=result.workload.isl, osl=result.workload.osl,
                              rate=result.workload.rate),
        performance_model=PerformanceModelInfo(source=model.source.value, detail=model.detail,
                                               fallback_reason=model.fallback_reason),
        plan=deployment(result.chosen),
        plan_yearly_usd=round(yearly_cost(result.chosen.gpus, request.hourly_price)),
        disaggregation_pays=result.disagg_pays, verdict=result.verdict,
        savings=None if savings is None else SavingsInfo(
            gpus=savings.gpus, agg_gpus=savings.agg_gpus, share=round(savings.share, 4),
            yearly_usd=round(savings.yearly_usd), price_per_gpu_hour=request.hourly_price),
        top_disaggregated=[deployment(c) for c in result.disagg[:request.top]],
        top_aggregated=[deployment(c) for c in result.agg[:request.top]],
        split=None if result.split is None else deployment(result.split),
        split_gpus=result.split_gpus, replay=replays,
        planning_seconds=round(result.seconds, 3),
        files={what: str(path) for what, path in files.items()})
