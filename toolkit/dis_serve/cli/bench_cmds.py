"""`bench` and `compare`: AIPerf sweeps against a graph, reports, and the CI gate."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console

from ..inputs.options import Command
from ..launch.termination import interrupt_on_termination

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..bench.metrics import BenchResult, PointResult
    from ..bench.request import BenchRequest, CompareRequest
    from ..bench.scenario import SweepPoint

console = Console(highlight=False, soft_wrap=True)


class _Display:
    """The progress bars, shown from the first point on: a run refused before it measures
    anything prints nothing but its error."""

    def __init__(self) -> None:
        self.shown: Progress | None = None

    @property
    def progress(self) -> Progress:
        if self.shown is None:
            self.shown = _progress()
            self.shown.start()
        return self.shown

    def __enter__(self) -> _Display:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.shown is not None:
            self.shown.stop()


class _RichObserver:
    """One progress bar per sweep point: requests finished (or seconds of load) and the phase
    AIPerf is in."""

    def __init__(self, display: _Display, prefix: str = "") -> None:
        self.display = display
        self.prefix = prefix
        self.tasks: dict[SweepPoint, int] = {}
        self.by_time: set[SweepPoint] = set()
        self.profiling_since: dict[SweepPoint, float] = {}

    @property
    def progress(self) -> Progress:
        return self.display.progress

    def _task(self, point: SweepPoint, total: float | None) -> int:
        task = self.progress.add_task(self.prefix + point.label, total=total,
                                      status="starting aiperf")
        self.tasks[point] = task
        return task

    def point_reused(self, point: SweepPoint, result: PointResult) -> None:
        task = self._task(point, 1)
        self.progress.update(task, completed=1, status=f"reused: {_brief(result)}")

    def point_started(self, point: SweepPoint, expected_requests: int | None,
                      duration_s: float | None) -> None:
        if expected_requests is None:
            self.by_time.add(point)
        self._task(point, expected_requests if expected_requests is not None else duration_s)

    def point_phase(self, point: SweepPoint, phase: str, event: str) -> None:
        if phase == "profiling" and event == "started":
            self.profiling_since[point] = time.monotonic()
        status = (f"{phase}" if event == "started" else
                  "reading results" if phase == "profiling" else f"{phase} done")
        self.progress.update(self.tasks[point], status=status)

    def point_tick(self, point: SweepPoint, elapsed_s: float,
                   finished_requests: int | None) -> None:
        task = self.tasks[point]
        if point in self.by_time:
            since = self.profiling_since.get(point)
            if since is not None:
                self.progress.update(task, completed=time.monotonic() - since)
        elif finished_requests is not None:
            self.progress.update(task, completed=finished_requests)

    def point_finished(self, point: SweepPoint, result: PointResult) -> None:
        task = self.tasks[point]
        total = self.progress.tasks[task].total
        self.progress.update(task, completed=total, status=f"done: {_brief(result)}")

    def point_failed(self, point: SweepPoint) -> None:
        if point in self.tasks:
            self.progress.update(self.tasks[point], status="[red]failed[/]")


def _brief(result: PointResult) -> str:
    ttft = result.aiperf.ttft_ms.p50 if result.aiperf.ttft_ms else None
    text = f"{result.aiperf.request_throughput:.2f} req/s"
    if ttft is not None:
        text += f", TTFT p50 {ttft:.0f} ms"
    if result.aiperf.errors:
        text += f", {result.aiperf.errors} errors"
    return text


def _progress() -> Progress:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}"), BarColumn(bar_width=30), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[status]}"),
                    console=console, transient=False)


def _num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _summary_table(result: BenchResult, title: str):
    from rich import box
    from rich.table import Table

    from ..bench.metrics import METRICS_BY_KEY

    # Short headers: the table must stay readable in an 80-column CI log.
    columns = (("request_throughput", "req/s", 2), ("tokens_per_s_per_gpu", "tok/s/GPU", 1),
               ("tokens_per_s_per_user", "tok/s/user", 1), ("goodput", "goodput", 2),
               ("ttft_p50_ms", "TTFT p50", 1), ("itl_p50_ms", "ITL p50", 2),
               ("e2e_p50_ms", "E2E p50", 0), ("errors", "errors", 0))
    table = Table(title=f"{title}; load = {result.scenario.load_kind.label}, latency in ms, "
                        "goodput in req/s", title_justify="left", box=box.SIMPLE_HEAD,
                  pad_edge=False, padding=(0, 0, 0, 1))
    table.add_column("load", justify="right", no_wrap=True)
    for _, header, _ in columns:
        table.add_column(header, justify="right", no_wrap=True, min_width=len(header))
    for p in result.points:
        table.add_row(p.point.display_value,
                      *(_num(METRICS_BY_KEY[key].get(p), digits) for key, _, digits in columns))
    return table


def _cache_line(result: BenchResult) -> str:
    """Which points started on cold workers, and how much the prefix cache served."""
    parts = []
    for p in result.points:
        state = p.prefix_cache.value if p.prefix_cache else "unknown"
        hits = p.aiperf.prefix_cache_hit_pct
        parts.append(f"{p.point.display_value} {state}"
                     + (f" ({hits:.0f}% of prompt tokens cached)" if hits is not None else ""))
    return "prefix cache at each point's start: " + ", ".join(parts)


def bench(request: BenchRequest) -> None:
    """Sweep a graph with AIPerf: report (JSON, CSV, Markdown, plots) and optional CI gate."""
    from ..workflows import run_bench

    interrupt_on_termination()  # SIGTERM stops AIPerf's tree and the graph, like Ctrl-C
    with _Display() as display:
        outcome = run_bench(request, observer=_RichObserver(display), on_event=console.print)
    run = outcome.run
    result = run.result
    console.print(_summary_table(result, f"{result.scenario.name} on {result.topology} "
                                         f"({result.gpus} GPUs)"))
    console.print(_cache_line(result), markup=False)
    console.print(f"report: {run.files.markdown}  (plots: {run.files.pareto_png.name}, "
                  f"{run.files.latency_png.name}; data: {run.files.json.name}, "
                  f"{run.files.csv.name}; evidence: fingerprint.json)", markup=False)
    for note in run.notes:
        console.print(note, markup=False)
    if outcome.baseline_written is not None:
        console.print(f"baseline written: {outcome.baseline_written}", markup=False)
    outcome.enforce()  # exit 1: an invalid run, or a metric past the gate
    if outcome.gate is not None:
        console.print(f"gate passed: {len(outcome.gate.checks)} checks within "
                      f"{outcome.gate.max_regression_pct:g}% of {outcome.baseline}",
                      markup=False)
    else:
        console.print(f"next: dis-serve compare graphs/agg-mocker.yaml "
                      f"{outcome.topology_file} --scenario {request.scenario}", markup=False)


def compare(request: CompareRequest) -> None:
    """Run one scenario on several arms, one after the other, and put them side by side."""
    from ..workflows import run_compare

    interrupt_on_termination()
    with _Display() as display:
        outcome = run_compare(request, observer_for=lambda tag: _RichObserver(display, tag),
                              on_event=console.print)
    _print_compare(outcome.arms)
    console.print(f"compare report: {outcome.files.markdown}  (plots: "
                  + ", ".join(p.name for p in outcome.files.plots) + ")", markup=False)
    outcome.enforce()  # exit 1: a run measured nothing real


def _print_compare(arms) -> None:
    from rich.table import Table

    from ..bench.ab import bucket_verdicts, compare_rows
    from ..bench.ab_report import change_text, spread_text, verdict_line
    from ..bench.metrics import METRICS_BY_KEY

    scenario = arms[0].runs[0].scenario
    table = Table(title=" vs ".join(f"{a.label} ({a.gpus} GPUs, {len(a.runs)} runs)"
                                    for a in arms), title_justify="left")
    for column in (scenario.load_kind.label, "metric", *(a.label for a in arms),
                   *(f"vs {arms[0].label}" for a in arms[1:])):
        table.add_column(column, justify="right")
    for row in compare_rows(arms):
        metric = METRICS_BY_KEY[row.metric]
        table.add_row(row.load, f"{metric.title} ({metric.unit})",
                      *(spread_text(c.value) for c in row.cells),
                      *(change_text(c) for c in row.cells[1:]))
    console.print(table)
    for v in bucket_verdicts(arms):
        console.print(f"goodput/GPU at {scenario.load_kind.label} {v.load}, input "
                      f"{v.bucket} tokens: {verdict_line(v)}", markup=False)


COMMANDS = (Command(bench, ("dis_serve.bench.request:BenchRequest",)),
            Command(compare, ("dis_serve.bench.request:CompareRequest",)))
