"""A plan for people (Rich tables, a Pareto plot) and for programs (plan.json)."""

from __future__ import annotations

import math
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..topology import Mode
from .planner import PlanResult
from .pricing import yearly_cost
from .replay import ReplayResult
from .request import Objective
from .search import Candidate


def short_label(cand: Candidate) -> str:
    """`P 14xTP2 b1 + D 5xTP4 b140`: role initial, workers x TP, max batch."""
    return " + ".join(f"{p.role.value[0].upper()} {p.workers}xTP{p.tp} b{p.max_batch}"
                      for p in cand.pools)


def _title(result: PlanResult) -> str:
    req, wl = result.request, result.workload
    goal = (f"{wl.rate:.3g} req/s on the fewest GPUs" if req.objective is Objective.FEWEST_GPUS
            else f"most goodput from {req.budget} GPUs")
    lengths = f"ISL {wl.isl} / OSL {wl.osl}" + (f" (trace {wl.trace.path.name})"
                                                if wl.trace else "")
    return (f"{req.target().name} on {req.gpu.value} (trtllm, {req.dtype.value}), {lengths}, "
            f"{goal}; SLA: p90 TTFT <= {req.ttft_ms:g} ms, p90 ITL <= {req.itl_ms:g} ms")


def candidates_table(title: str, rows: list[Candidate], chosen: Candidate) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("#", "deployment", "GPUs", "req/s", "tok/s/GPU", "tok/s/user",
                   "TTFT p90", "ITL p90", "limit"):
        table.add_column(column, justify="left" if column == "deployment" else "right",
                         no_wrap=column == "deployment")
    for i, cand in enumerate(rows, 1):
        pred = cand.prediction
        mark = "*" if cand is chosen else ""
        table.add_row(f"{i}{mark}", short_label(cand), str(cand.gpus), f"{cand.rate:.2f}",
                      f"{cand.tokens_per_s_per_gpu:.1f}", f"{cand.tokens_per_s_per_user:.1f}",
                      f"{pred.ttft_p90_ms:.0f}", f"{pred.itl_p90_ms:.1f}", cand.limit)
    return table


def replay_table(rows: list[tuple[str, Candidate, ReplayResult]]) -> Table:
    table = Table(title="Predicted vs replayed (Dynamo virtual-clock replay, steady state; "
                        "ms, requests/s)", title_justify="left")
    for column in ("", "", "TTFT mean", "TTFT p90", "ITL mean", "ITL p90", "req/s", "tok/s",
                   "SLA met"):
        table.add_column(column, justify="left" if not column else "right")
    for name, cand, rep in rows:
        pred = cand.prediction
        table.add_row(name, "predicted", f"{pred.ttft_mean_ms:.0f}", f"{pred.ttft_p90_ms:.0f}",
                      f"{pred.itl_ms:.1f}", f"{pred.itl_p90_ms:.1f}", f"{cand.rate:.2f}",
                      f"{cand.tokens_per_s:,.0f}", ">=90%")
        table.add_row("", "replayed", f"{rep.ttft_mean_ms:.0f}", f"{rep.ttft_p90_ms:.0f}",
                      f"{rep.itl_mean_ms:.1f}", f"{rep.itl_p90_ms:.1f}",
                      f"{rep.served_rate:.2f}", f"{rep.output_tokens_per_s:,.0f}",
                      f"{rep.sla_met_share:.0%}")
        table.add_row("", "difference", _diff(rep.ttft_mean_ms, pred.ttft_mean_ms),
                      _diff(rep.ttft_p90_ms, pred.ttft_p90_ms),
                      _diff(rep.itl_mean_ms, pred.itl_ms), _diff(rep.itl_p90_ms, pred.itl_p90_ms),
                      _diff(rep.served_rate, cand.rate), "", "")
    return table


def _diff(replayed: float, predicted: float) -> str:
    return f"{replayed / predicted - 1:+.1%}" if predicted else "-"


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


def print_plan(result: PlanResult, console: Console, *, replays, files: dict[str, Path]) -> None:
    req = result.request
    console.print(f"[bold]dis-serve plan[/]: {_title(result)}")
    source = result.model
    console.print(f"performance model: {source.source.value} - {source.detail}", markup=False)
    if source.fallback_reason:
        console.print(f"  (roofline because: {source.fallback_reason})", markup=False)
    objective = ("fewest GPUs" if req.objective is Objective.FEWEST_GPUS else "most goodput")
    for mode, rows in (("disaggregated", result.disagg), ("aggregated", result.agg)):
        if rows:
            console.print(candidates_table(f"Top {mode} ({objective})", rows[:req.top],
                                           result.chosen))
        else:
            console.print(f"No {mode} deployment meets the SLA.")
    chosen = result.chosen
    console.print(f"\n[bold]Plan[/]: {chosen.mode.value} - {chosen.label}", highlight=False)
    console.print(f"  {chosen.gpus} GPUs, {chosen.rate:.2f} req/s, "
                  f"{chosen.tokens_per_s_per_gpu:.1f} tokens/s/GPU, "
                  f"{yearly_cost(chosen.gpus, req.hourly_price):,.0f} USD/year at "
                  f"{req.hourly_price:g} USD/GPU-hour", markup=False)
    console.print(result.verdict, markup=False)
    if result.savings is not None and result.savings.gpus > 0:
        s = result.savings
        console.print(f"Saved against the best aggregated deployment for the same goodput: "
                      f"{s.gpus} of {s.agg_gpus} GPUs ({s.share:.0%}), "
                      f"{s.yearly_usd:,.0f} USD a year.", markup=False)
    if result.split_gpus is not None:
        _print_split(result, console)
    if replays:
        console.print(replay_table(replays))
        for name, cand, rep in replays:
            console.print(_agreement(name, cand, rep), markup=False)
    for what, path in files.items():
        console.print(f"wrote {what}: {path}", markup=False)


def _print_split(result: PlanResult, console: Console) -> None:
    p, d = result.split_gpus or (0, 0)
    split = result.split
    if split is None:
        console.print(f"The {p} prefill + {d} decode GPU split meets the SLA with no TP and "
                      "batch choice.", markup=False)
        return
    chosen = result.chosen
    console.print(f"The {p} prefill + {d} decode GPU split at its best ({split.label}): "
                  f"{split.rate:.2f} req/s, {split.tokens_per_s_per_gpu:.1f} tokens/s/GPU, "
                  f"p90 TTFT {split.prediction.ttft_p90_ms:.0f} ms, runs out of "
                  f"{split.limit} first ({split.rate / chosen.rate - 1:+.0%} goodput against "
                  "the plan).", markup=False)


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
    text = (f"{name}: {rep.measured_requests} of {rep.requests} replayed requests measured in "
            f"{rep.wall_s:.1f} s; mean TTFT, ITL and throughput within {means:.0%} of the "
            f"prediction, 90th percentiles within {tails:.0%}.")
    if not rep.steady:
        text += " The run was too short for a steady state; figures cover every request."
    metric, gap = max(_gaps(cand, rep), key=lambda g: abs(g[1]))
    if abs(gap) > 0.10:
        side = "more" if gap > 0 else "less"
        text += (f" The largest gap, {metric} ({gap:+.0%}: the replay saw {side}), is "
                 "queueing: the prediction's waits are closed-form (Erlang C) estimates of the "
                 "router and batchers that the replay runs event by event on the same "
                 "step-time tables; where they differ, trust the replay.")
    return text


def pareto_png(result: PlanResult, path: Path) -> Path:
    """tokens/s/GPU against tokens/s/user for every shape the search kept."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for mode, colour in ((Mode.AGG, "tab:blue"), (Mode.DISAGG, "tab:orange")):
        points = [(c.tokens_per_s_per_user, c.tokens_per_s_per_gpu)
                  for c in result.candidates if c.mode is mode]
        if not points:
            continue
        ax.scatter(*zip(*points, strict=True), s=14, alpha=0.35, color=colour)
        front = _frontier(points)
        ax.plot(*zip(*front, strict=True), color=colour, label=f"{mode.value} frontier")
    chosen = result.chosen
    ax.scatter([chosen.tokens_per_s_per_user], [chosen.tokens_per_s_per_gpu], marker="*",
               s=220, color="black", label=f"plan: {short_label(chosen)}", zorder=5)
    if result.best_agg is not None and result.best_agg is not chosen:
        best = result.best_agg
        ax.scatter([best.tokens_per_s_per_user], [best.tokens_per_s_per_gpu], marker="D",
                   s=60, color="tab:blue", label=f"best agg: {short_label(best)}", zorder=5)
    if result.split is not None:
        split = result.split
        ax.scatter([split.tokens_per_s_per_user], [split.tokens_per_s_per_gpu], marker="X",
                   s=90, color="tab:red", label=f"split: {short_label(split)}", zorder=5)
    ax.set_xlabel("tokens/s per user (1000 / ITL)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(_title(result), fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both axes, by tokens/s/user."""
    front, best = [], -math.inf
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return sorted(front)


def candidate_dict(cand: Candidate) -> dict:
    pred = cand.prediction
    return {
        "mode": cand.mode.value, "gpus": cand.gpus, "label": cand.label,
        "pools": [{"role": p.role.value, "workers": p.workers, "tensor_parallel": p.tp,
                   "max_batch_size": p.max_batch, "max_num_tokens": p.max_num_tokens}
                  for p in cand.pools],
        "requests_per_s": round(cand.rate, 4), "tokens_per_s": round(cand.tokens_per_s, 1),
        "tokens_per_s_per_gpu": round(cand.tokens_per_s_per_gpu, 2),
        "tokens_per_s_per_user": round(cand.tokens_per_s_per_user, 2),
        "ttft_mean_ms": round(pred.ttft_mean_ms, 1), "ttft_p90_ms": round(pred.ttft_p90_ms, 1),
        "itl_mean_ms": round(pred.itl_ms, 2), "itl_p90_ms": round(pred.itl_p90_ms, 2),
        "runs_out_first": cand.limit,
    }


def plan_dict(result: PlanResult, replays, files: dict[str, Path]) -> dict:
    req = result.request
    savings = result.savings
    return {
        "request": req.model_dump(mode="json", exclude_none=True),
        "workload": {"isl": result.workload.isl, "osl": result.workload.osl,
                     "rate": result.workload.rate},
        "performance_model": {"source": result.model.source.value,
                              "detail": result.model.detail,
                              "fallback_reason": result.model.fallback_reason},
        "plan": candidate_dict(result.chosen),
        "disaggregation_pays": result.disagg_pays,
        "verdict": result.verdict,
        "savings": None if savings is None else {
            "gpus": savings.gpus, "agg_gpus": savings.agg_gpus,
            "yearly_usd": round(savings.yearly_usd), "price_per_gpu_hour": req.hourly_price},
        "top_disaggregated": [candidate_dict(c) for c in result.disagg[:req.top]],
        "top_aggregated": [candidate_dict(c) for c in result.agg[:req.top]],
        "split": None if result.split is None else candidate_dict(result.split),
        "replay": [{"deployment": name, "requests": rep.requests,
                    "measured_requests": rep.measured_requests, "steady": rep.steady,
                    "ttft_mean_ms": round(rep.ttft_mean_ms, 1),
                    "ttft_p90_ms": round(rep.ttft_p90_ms, 1),
                    "itl_mean_ms": round(rep.itl_mean_ms, 2),
                    "itl_p90_ms": round(rep.itl_p90_ms, 2),
                    "requests_per_s": round(rep.served_rate, 4),
                    "sla_met_share": round(rep.sla_met_share, 4), "wall_s": round(rep.wall_s, 3),
                    "worst_difference_means": round(worst_difference(cand, rep), 4),
                    "worst_difference_p90": round(worst_difference(cand, rep, tails=True), 4)}
                   for name, cand, rep in replays],
        "planning_seconds": round(result.seconds, 3),
        "files": {k: str(v) for k, v in files.items()},
    }
