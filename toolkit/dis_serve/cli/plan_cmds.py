"""`plan`: size prefill and decode pools for a model, workload and SLA, and emit the graph."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..errors import UserInputError

if TYPE_CHECKING:
    from rich.table import Table

    from ..plan.outcome import Deployment, PlanOutcome, Replay

console = Console(highlight=False, soft_wrap=True)

# The request's fields as this command's flags: errors from the planner name fields in
# backticks, the user sees the flag to change.
FLAGS = {"isl": "--isl", "osl": "--osl", "rate": "--rate", "budget": "--budget",
         "ttft_ms": "--ttft-ms", "itl_ms": "--itl-ms", "gpu": "--gpu", "model": "--model",
         "price_per_gpu_hour": "--price", "gpus_per_node": "--gpus-per-node",
         "dtype": "--dtype", "kv_cache_dtype": "--kv-cache-dtype", "top": "--top",
         "trace": "--trace", "perf_model": "--perf-model", "compare_split": "--compare-split",
         "replay_requests": "--replay-requests", "calibrate": "--calibrate"}


def _in_flags(exc: UserInputError) -> UserInputError:
    def flag(text: str | None) -> str | None:
        return None if text is None else re.sub(
            r"`(\w+)`", lambda m: FLAGS.get(m[1], m[0]), text)

    return UserInputError(flag(exc.detail) or "", source=exc.source,
                          key=FLAGS.get(exc.key or "", exc.key), fix=flag(exc.fix))


def _split(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\d+):(\d+)", value.strip())
    if not match or 0 in (int(match[1]), int(match[2])):
        raise UserInputError(f"{value!r} is not PREFILL:DECODE GPUs", key="--compare-split",
                             fix="e.g. --compare-split 8:40")
    return int(match[1]), int(match[2])


ModelOpt = Annotated[str, typer.Option(
    help="llama-3.1-70b, llama-3.1-8b, qwen3-32b (or their Hugging Face ids).")]
TtftOpt = Annotated[float, typer.Option(help="SLA: 90th-percentile time to first token.")]
ItlOpt = Annotated[float, typer.Option(
    help="SLA: 90th percentile of requests' mean inter-token latency.")]
GpuOpt = Annotated[str, typer.Option(help="h100-sxm, h200, a100-80gb, l40s, l4.")]
IslOpt = Annotated[int | None, typer.Option(help="Prompt tokens per request.")]
OslOpt = Annotated[int | None, typer.Option(help="Output tokens per request.")]
TraceOpt = Annotated[Path | None, typer.Option(
    help="Mooncake JSONL trace instead of --isl/--osl (its mean lengths are planned for, its "
         "timestamps give the rate, the replay replays it).")]
RateOpt = Annotated[float | None, typer.Option(
    help="Objective (a): serve this many requests/s on the fewest GPUs.")]
BudgetOpt = Annotated[int | None, typer.Option(
    help="Objective (b): most goodput from this many GPUs.")]
PriceOpt = Annotated[float | None, typer.Option(
    help="USD per GPU-hour (default: the catalog's list price).")]
DtypeOpt = Annotated[str, typer.Option(help="Weights: bf16, fp8, int8, awq.")]
KvDtypeOpt = Annotated[str, typer.Option(help="KV cache: bf16, fp8.")]
NodeOpt = Annotated[int, typer.Option(help="GPUs per node.")]
PerfModelOpt = Annotated[str | None, typer.Option(
    help="Force aiconfigurator or roofline (default: AIConfigurator where it has data).")]
TopOpt = Annotated[int, typer.Option(help="Rows per table.")]
SplitOpt = Annotated[str | None, typer.Option(
    help="Also evaluate a fixed PREFILL:DECODE GPU split, e.g. 8:40.")]
OutOpt = Annotated[Path | None, typer.Option(
    help="Directory for plan.json, pareto.png, topologies and the mocker profile "
         "(default: .dis-serve/plans/NAME).")]
EmitOpt = Annotated[Path | None, typer.Option(
    help="Also write the chosen topology here (the mocker graph with --mock); refused for a "
         "plan that failed its replay unless --force.")]
MockOpt = Annotated[bool, typer.Option(
    help="--emit writes the mocker graph timed like the planned GPUs.")]
ForceOpt = Annotated[bool, typer.Option(
    help="--emit the plan even if it failed its replay.")]
ReplayOpt = Annotated[bool, typer.Option(
    help="Verify the plan in Dynamo's virtual-clock replay (backing off until it holds).")]
CalibrateOpt = Annotated[list[Path] | None, typer.Option(
    help="`bench` results (results.json or its folder; repeatable) to fit per-phase "
         "correction factors from; the plan uses them and writes calibration.json.")]
AutoscaleOpt = Annotated[bool, typer.Option(
    help="Give the trtllm topology an `autoscale` section: on Kubernetes Dynamo's SLA planner "
         "then holds the SLA within the planned GPUs.")]
ReplayRequestsOpt = Annotated[int | None, typer.Option(
    help="Requests to replay (default: enough for a steady state, at least 2000).")]


def plan(model: ModelOpt, ttft_ms: TtftOpt, itl_ms: ItlOpt, gpu: GpuOpt = "h100-sxm",
         isl: IslOpt = None, osl: OslOpt = None, trace: TraceOpt = None, rate: RateOpt = None,
         budget: BudgetOpt = None, price: PriceOpt = None, dtype: DtypeOpt = "bf16",
         kv_cache_dtype: KvDtypeOpt = "bf16", gpus_per_node: NodeOpt = 8,
         perf_model: PerfModelOpt = None, top: TopOpt = 5, compare_split: SplitOpt = None,
         out: OutOpt = None, emit: EmitOpt = None, mock: MockOpt = False,
         force: ForceOpt = False, replay: ReplayOpt = True,
         replay_requests: ReplayRequestsOpt = None, calibrate: CalibrateOpt = None,
         autoscale: AutoscaleOpt = False) -> None:
    """Size prefill/decode (or aggregated) pools from measured H100 data, verify the plan in
    Dynamo's replay, price it and write it as a topology."""
    from ..errors import RunError
    from ..plan.request import build_request
    from ..plan.runner import run_plan

    if not console.is_terminal:  # logs and CI: wide enough for the tables
        console.width = max(console.width, 120)
    try:
        request = build_request(
            model=model, gpu=gpu, isl=isl, osl=osl, trace=trace, rate=rate, budget=budget,
            ttft_ms=ttft_ms, itl_ms=itl_ms, price_per_gpu_hour=price, dtype=dtype,
            kv_cache_dtype=kv_cache_dtype, gpus_per_node=gpus_per_node, perf_model=perf_model,
            top=top, compare_split=_split(compare_split), replay=replay,
            replay_requests=replay_requests, calibrate=tuple(calibrate or ()),
            autoscale=autoscale)
        outcome = run_plan(request, out, emit=emit, emit_mock=mock, force_emit=force)
    except UserInputError as exc:
        raise _in_flags(exc) from None
    _print_outcome(outcome)
    if outcome.emit_refused:
        raise RunError(f"--emit refused: {outcome.emit_refused} (fix: relax the SLA, or "
                       "--force to write it anyway)")
    target = outcome.files.get("emitted topology", outcome.files["topology (mocker)"])
    console.print(f"next: dis-serve validate {target} && dis-serve up {target}", markup=False)


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
            console.print(_candidates_table(f"Top {mode} ({objective})", rows, outcome.plan))
        else:
            console.print(f"No {mode} deployment meets the SLA.")
    chosen = outcome.plan
    console.print(f"\n[bold]Plan[/]: {chosen.mode.value} - {chosen.label}", highlight=False)
    console.print(f"  {chosen.gpus} GPUs, {chosen.requests_per_s:.2f} req/s, "
                  f"{chosen.tokens_per_s_per_gpu:.1f} tokens/s/GPU, "
                  f"{outcome.plan_yearly_usd:,.0f} USD/year at {req.hourly_price:g} "
                  "USD/GPU-hour", markup=False)
    console.print(outcome.verdict, markup=False)
    _print_verification(outcome)
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
    state = "holds" if replayed.passed else "FAILS"
    console.print(f"Replayed: {replayed.sla_met_share:.0%} of requests met the SLA (the plan "
                  f"{state}: it promises 90%), on {replayed.replayed}.", markup=False)
    tried = [s for s in outcome.verification if not s.passed]
    for step in tried:
        console.print(f"  backed off from {step.deployment} at "
                      f"{step.requests_per_s:.2f} req/s: {step.sla_met_share:.0%} met the SLA "
                      "in replay", markup=False)


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


def _candidates_table(title: str, rows: list[Deployment], chosen: Deployment) -> Table:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("#", "deployment", "GPUs", "req/s", "tok/s/GPU", "tok/s/user",
                   "TTFT p90", "ITL p90", "limit"):
        table.add_column(column, justify="left" if column == "deployment" else "right",
                         no_wrap=column == "deployment")
    for i, cand in enumerate(rows, 1):
        mark = "*" if cand == chosen else ""
        table.add_row(f"{i}{mark}", cand.short_label, str(cand.gpus),
                      f"{cand.requests_per_s:.2f}", f"{cand.tokens_per_s_per_gpu:.1f}",
                      f"{cand.tokens_per_s_per_user:.1f}", f"{cand.ttft_p90_ms:.0f}",
                      f"{cand.itl_p90_ms:.1f}", cand.runs_out_first)
    return table


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
        _replay_rows(table, rep, pred)
    return table


def _replay_rows(table: Table, rep: Replay, pred: Deployment) -> None:
    table.add_row(rep.deployment, "predicted", f"{pred.ttft_mean_ms:.0f}",
                  f"{pred.ttft_p90_ms:.0f}", f"{pred.itl_mean_ms:.1f}",
                  f"{pred.itl_p90_ms:.1f}", f"{pred.requests_per_s:.2f}",
                  f"{pred.tokens_per_s:,.0f}", "(>=90%)")
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


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(plan)
