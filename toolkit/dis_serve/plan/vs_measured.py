"""A benchmark of a planned graph against its plan: predicted, replayed and measured in one
table, and in the ledger.

`dis-serve plan --emit` names the plan's `plan.json` in the emitted topology's header (a
mocker graph also has it beside its `mocker.profile_data`). Every measured run of that graph
(a bench, each run of a compare, chaos's fault-free run) ends in the after-bench hook
`record_planned_run`, which dis_serve/workflows gives them: `after_bench` finds the plan,
compares the sweep point whose measured throughput is closest to the planned rate with what
the plan predicted and what Dynamo's replay saw, and appends every point to the ledger
(`ledger`). It lives here, not in `bench`, because `plan` already reads `bench` results
(calibration): `bench` knows nothing of plans, so the two packages do not import each
other."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from ..bench.metrics import BenchResult, PointResult
from ..bench.runner import BenchRun
from ..topology import Topology
from .emit import PLAN_FILE, plan_file_named_in
from .ledger import append, entries_for, ledger_path
from .outcome import PlanOutcome


def plan_of_topology(topology_file: str | None) -> tuple[PlanOutcome, Path] | None:
    """The plan a topology was emitted from and its file (None: not a planned graph): named
    in the emitted file's header, or beside a mocker graph's timing tables."""
    from ..inputs.yaml_input import load_model_file

    if topology_file is None or not Path(topology_file).is_file():
        return None
    plan_file = plan_file_named_in(Path(topology_file))
    if plan_file is None:
        topo = load_model_file(Topology, Path(topology_file))
        profile = topo.mocker.profile_data if topo.mocker else None
        if not profile:
            return None
        plan_file = Path(profile).parent / PLAN_FILE
    try:
        return PlanOutcome.model_validate_json(plan_file.read_text()), plan_file
    except (OSError, ValidationError):
        return None


def closest_point(result: BenchResult, rate: float) -> PointResult | None:
    points = [p for p in result.points if p.aiperf.ttft_ms and p.aiperf.itl_ms]
    return min(points, key=lambda p: abs(p.aiperf.request_throughput - rate), default=None)


def plan_markdown(result: BenchResult) -> str:
    """The report's section comparing the plan with the measurement ("" when the graph was
    not planned)."""
    planned = plan_of_topology(result.topology_file)
    if planned is None:
        return ""
    outcome, _ = planned
    plan = outcome.plan
    point = closest_point(result, plan.requests_per_s)
    if point is None:
        return ""
    rows = [["predicted (plan)", plan.ttft_mean_ms, plan.ttft_p90_ms, plan.itl_mean_ms,
             plan.itl_p90_ms, plan.requests_per_s, plan.tokens_per_s]]
    replayed = next((r for r in outcome.replay if r.deployment == "plan"), None)
    if replayed is not None:
        rows.append(["replayed (Dynamo replay)", replayed.ttft_mean_ms, replayed.ttft_p90_ms,
                     replayed.itl_mean_ms, replayed.itl_p90_ms, replayed.requests_per_s,
                     replayed.output_tokens_per_s])
    a = point.aiperf
    assert a.ttft_ms is not None and a.itl_ms is not None
    rows.append([f"measured ({point.point.label})", a.ttft_ms.avg, a.ttft_ms.p90, a.itl_ms.avg,
                 a.itl_ms.p90, a.request_throughput, a.output_token_throughput])
    lines = ["", "## Plan vs measurement", "",
             f"This graph was planned by `dis-serve plan` ({plan.label}). The measured row is "
             f"the sweep point whose throughput is closest to the planned "
             f"{plan.requests_per_s:.2f} requests/s. The plan's ITL is the mean step time; "
             "AIPerf's is the mean gap between tokens.", "",
             "| | TTFT mean (ms) | TTFT p90 (ms) | ITL mean (ms) | ITL p90 (ms) | req/s | "
             "tokens/s |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, *values in rows:
        lines.append(f"| {name} | {values[0]:.0f} | {values[1]:.0f} | {values[2]:.2f} | "
                     f"{values[3]:.2f} | {values[4]:.2f} | {values[5]:,.0f} |")
    measured = rows[-1]
    lines += ["", "Measured against predicted: " + ", ".join(
        f"{name} {m / p - 1:+.1%}" for name, m, p in (
            ("TTFT mean", measured[1], rows[0][1]), ("ITL mean", measured[3], rows[0][3]),
            ("req/s", measured[5], rows[0][5])) if p) + ".", ""]
    return "\n".join(lines)


def after_bench(result: BenchResult, report_md: Path) -> int | None:
    """What a bench of a planned graph adds: the plan-vs-measurement section in its
    `report.md` and its points in the ledger (how many were new); None when the graph was
    not planned (the report untouched)."""
    planned = plan_of_topology(result.topology_file)
    if planned is None:
        return None
    section = plan_markdown(result)
    if section:
        with report_md.open("a", encoding="utf-8") as out:
            out.write(section)
    outcome, plan_file = planned
    return append(entries_for(outcome, plan_file, result))


def record_planned_run(run: BenchRun) -> str | None:
    """The after-bench hook (bench/runner.AfterBench) every measured run gets: for a planned
    graph, `after_bench` and a line saying how many points the ledger gained. A run of the
    file's topology with a key changed (an arm of `compare --vary`) is no run of the plan."""
    from ..inputs.yaml_input import load_model_file

    file = run.result.topology_file
    if file is None or not Path(file).is_file() or (
            load_model_file(Topology, Path(file)).digest != run.topology_digest):
        return None
    recorded = after_bench(run.result, run.files.markdown)
    if recorded is None:
        return None
    return f"planned graph: {recorded} point(s) added to the ledger {ledger_path()}"
