"""`plan`: size prefill and decode pools for a model, workload and SLA, and emit the graph."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..inputs.options import Command

if TYPE_CHECKING:
    from rich.table import Table

    from ..plan.outcome import Deployment, PlanOutcome, Replay
    from ..plan.request import PlanFiles, PlanRequest

console = Console(highlight=False, soft_wrap=True)


def plan(request: PlanRequest, files: PlanFiles) -> None:
    """Size prefill/decode (or aggregated) pools from measured H100 data, verify the plan in
    Dynamo's replay, price it and write it as a topology."""
    from ..errors import RunError
    from ..plan.pipeline import run_plan

    if not console.is_terminal:  # logs and CI: wide enough for the tables
        console.width = max(console.width, 120)
    outcome = run_plan(request, files.out, emit=files.emit, emit_mock=files.mock,
                       force_emit=files.force)
    _print_outcome(outcome)
    if outcome.emit_refused:
        raise RunError(f"--emit refused: {outcome.emit_refused} (fix: relax the SLA or the "
                       "load, give the replay more requests, or --force to write it anyway)")
    target = outcome.files.get("emitted topology", outcome.files["topology (mocker)"])
    console.print(f"next: dis-serve validate {target} && dis-serve up {target}", markup=False)


# The question (`PlanRequest`, recorded in plan.json) and what the command writes.
COMMANDS = (Command(plan, ("dis_serve.plan.request:PlanRequest",
                           "dis_serve.plan.request:PlanFiles")),)


def _print_outcome(outcome: PlanOutcome) -> None:
    from ..plan.request import Objective

    req = outcome.request
    console.print(f"[bold]dis-serve plan[/]: {outcome.title}")
    source = outcome.performance_model
    console.print(f"performance model: {source.source} - {source.detail}", markup=False)
    if source.fallback_reason:
        console.print(f"  (roofline because: {source.fallback_reason})", markup=False)
    if outcome.calibration is not None:
        _print_calibration(outcome)
    objective = "fewest GPUs" if req.objective is Objective.FEWEST_GPUS else "most goodput"
    for mode, rows in (("disaggregated", outcome.top_disaggregated),
                       ("aggregated", outcome.top_aggregated)):
        if rows:
            console.print(_candidates_table(f"Top {mode} ({objective})", rows, outcome.plan,
                                            req.sla_percentile))
        else:
            console.print(f"No {mode} deployment meets the SLA.")
    chosen = outcome.plan
    console.print(f"\n[bold]Plan[/]: {chosen.mode.value} - {chosen.label}", highlight=False)
    console.print(f"  {chosen.gpus} GPUs, {chosen.requests_per_s:.2f} req/s, "
                  f"{chosen.tokens_per_s_per_gpu:.1f} tokens/s/GPU, "
                  f"{outcome.plan_yearly_usd:,.0f} USD/year at {req.hourly_price:g} "
                  "USD/GPU-hour", markup=False)
    console.print(outcome.verdict.sentence, markup=False)
    console.print(outcome.verdict.uncertainty, markup=False)
    _print_verification(outcome)
    if outcome.measured_error is not None:
        console.print(_ledger_line(outcome), markup=False)
    if outcome.placement_note:
        console.print(f"Topology: {outcome.placement_note}", markup=False)
    if outcome.savings is not None and outcome.savings.gpus > 0:
        s = outcome.savings
        console.print(f"Saved against the best aggregated deployment for the same goodput: "
                      f"{s.gpus} of {s.agg_gpus} GPUs ({s.share:.0%}), "
                      f"{s.yearly_usd:,.0f} USD a year.", markup=False)
    if outcome.split_gpus is not None:
        console.print(_split_line(outcome), markup=False)
    if outcome.replay:
        console.print(_replay_table(outcome))
        for rep in outcome.replay:
            console.print(rep.agreement, markup=False)
    for what, path in outcome.files.items():
        console.print(f"wrote {what}: {path}", markup=False)


def _print_calibration(outcome: PlanOutcome) -> None:
    from rich.table import Table

    cal = outcome.calibration
    assert cal is not None
    kv = "not identifiable from one prompt length (1)" if cal.kv_transfer is None else (
        f"{cal.kv_transfer:.3f}")
    console.print(f"calibrated from {len(cal.points)} measured point(s): prefill x"
                  f"{cal.prefill:.3f}, decode x{cal.decode:.3f}, KV transfer {kv}",
                  markup=False)
    table = Table(title="Measured vs predicted (ms; before -> after calibration)",
                  title_justify="left")
    for column in ("point", "req/s", "TTFT measured", "TTFT predicted", "ITL measured",
                   "ITL predicted"):
        table.add_column(column, justify="left" if column == "point" else "right")
    for p in cal.points:
        table.add_row(p.source.rsplit(":", 1)[-1], f"{p.requests_per_s:.2f}",
                      f"{p.measured_ttft_ms:.0f}",
                      f"{p.predicted_ttft_ms:.0f} -> {p.calibrated_ttft_ms:.0f}",
                      f"{p.measured_itl_ms:.2f}",
                      f"{p.predicted_itl_ms:.2f} -> {p.calibrated_itl_ms:.2f}")
    console.print(table)


def _print_verification(outcome: PlanOutcome) -> None:
    replayed = next((r for r in outcome.replay if r.deployment == "plan"), None)
    if replayed is None:
        console.print("Not replayed (--no-replay): the SLA attainment is the model's alone.",
                      markup=False)
        return
    state = (f"holds: it promises {outcome.request.sla_percentile:g}% at the planned rate"
             if replayed.passed
             else f"FAILS: it {replayed.failed_because}")
    console.print(f"Replayed: {replayed.sla_met_share:.0%} of requests met the SLA, "
                  f"{replayed.requests_per_s:.2f} of the planned "
                  f"{outcome.plan.requests_per_s:.2f} req/s served (the plan {state}), on "
                  f"{replayed.replayed}.", markup=False)
    for step in outcome.verification:
        if not step.passed:
            console.print(f"  backed off from {step.deployment} at "
                          f"{step.requests_per_s:.2f} req/s: it {step.failed_because}",
                          markup=False)


def _ledger_line(outcome: PlanOutcome) -> str:
    err = outcome.measured_error
    assert err is not None
    ratios = ", ".join(f"{name} x{value:.2f}" for name, value in (
        ("TTFT", err.ttft_mean), ("ITL", err.itl_mean), ("throughput", err.requests_per_s))
        if value is not None)
    return (f"Measured against this model: {ratios} (measured / predicted, median of the "
            f"{err.entries} nearest of {err.of} benchmarked plan(s) of "
            f"{outcome.request.target().name} on {outcome.request.gpu.value} in {err.ledger}; "
            f"nearest: {err.nearest[0]}).")


def _split_line(outcome: PlanOutcome) -> str:
    p, d = outcome.split_gpus or (0, 0)
    split = outcome.split
    if split is None:
        return (f"The {p} prefill + {d} decode GPU split meets the SLA with no TP and batch "
                "choice.")
    gain = split.requests_per_s / outcome.plan.requests_per_s - 1
    return (f"The {p} prefill + {d} decode GPU split at its best ({split.label}): "
            f"{split.requests_per_s:.2f} req/s, {split.tokens_per_s_per_gpu:.1f} tokens/s/GPU, "
            f"p90 TTFT {split.ttft_p90_ms:.0f} ms, runs out of {split.runs_out_first} first "
            f"({gain:+.0%} goodput against the plan).")


def _candidates_table(title: str, rows: list[Deployment], chosen: Deployment,
                      percentile: float) -> Table:
    """The deployments with their tails at the SLA's percentile (p90 by default)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("#", "deployment", "GPUs", "req/s", "tok/s/GPU", "tok/s/user",
                   f"TTFT p{percentile:g}", f"ITL p{percentile:g}", "limit"):
        table.add_column(column, justify="left" if column == "deployment" else "right",
                         no_wrap=column == "deployment")
    for i, cand in enumerate(rows, 1):
        mark = "*" if cand == chosen else ""
        table.add_row(f"{i}{mark}", cand.short_label, str(cand.gpus),
                      f"{cand.requests_per_s:.2f}", f"{cand.tokens_per_s_per_gpu:.1f}",
                      f"{cand.tokens_per_s_per_user:.1f}",
                      f"{_tail(cand.ttft_tail_ms, cand.ttft_p90_ms):.0f}",
                      f"{_tail(cand.itl_tail_ms, cand.itl_p90_ms):.1f}", cand.runs_out_first)
    return table


def _tail(tail: float | None, p90: float) -> float:
    """The figure at the SLA's percentile (a plan written before percentiles had p90 only)."""
    return p90 if tail is None else tail


def _replay_table(outcome: PlanOutcome) -> Table:
    from rich.table import Table

    table = Table(title="Predicted vs replayed (Dynamo virtual-clock replay, steady state; "
                        "ms, requests/s)", title_justify="left")
    for column in ("", "", "TTFT mean", "TTFT p90", "ITL mean", "ITL p90", "req/s", "tok/s",
                   "SLA met"):
        table.add_column(column, justify="left" if not column else "right")
    for rep in outcome.replay:
        pred = outcome.plan if rep.deployment == "plan" else outcome.split
        assert pred is not None
        _replay_rows(table, rep, pred, outcome.request.sla_percentile)
    return table


def _replay_rows(table: Table, rep: Replay, pred: Deployment, percentile: float) -> None:
    table.add_row(rep.deployment, "predicted", f"{pred.ttft_mean_ms:.0f}",
                  f"{pred.ttft_p90_ms:.0f}", f"{pred.itl_mean_ms:.1f}",
                  f"{pred.itl_p90_ms:.1f}", f"{pred.requests_per_s:.2f}",
                  f"{pred.tokens_per_s:,.0f}", f"(>={percentile:g}%)")
    table.add_row("", "replayed", f"{rep.ttft_mean_ms:.0f}", f"{rep.ttft_p90_ms:.0f}",
                  f"{rep.itl_mean_ms:.1f}", f"{rep.itl_p90_ms:.1f}",
                  f"{rep.requests_per_s:.2f}", f"{rep.output_tokens_per_s:,.0f}",
                  f"{rep.sla_met_share:.0%}")
    table.add_row("", "difference", _diff(rep.ttft_mean_ms, pred.ttft_mean_ms),
                  _diff(rep.ttft_p90_ms, pred.ttft_p90_ms),
                  _diff(rep.itl_mean_ms, pred.itl_mean_ms),
                  _diff(rep.itl_p90_ms, pred.itl_p90_ms),
                  _diff(rep.requests_per_s, pred.requests_per_s), "", "")


def _diff(replayed: float, predicted: float) -> str:
    return f"{replayed / predicted - 1:+.1%}" if predicted else "-"
