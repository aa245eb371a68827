"""`bench` and `compare`: AIPerf sweeps against a graph, reports, and the CI gate."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..errors import UserInputError
from ..termination import interrupt_on_termination

if TYPE_CHECKING:
    from rich.progress import Progress

    from ..bench.metrics import BenchResult, PointResult
    from ..bench.scenario import SweepPoint

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

ScenarioOpt = Annotated[Path, typer.Option(
    "--scenario", help="Scenario YAML (benchmarks/smoke.yaml, chat.yaml, long-prompt.yaml).")]
OutOpt = Annotated[Path | None, typer.Option(
    "--out", help="Output directory; rerunning into the same one resumes the sweep "
                  "(default .dis-serve/bench/<topology>-<scenario>).")]
TokenizerOpt = Annotated[str | None, typer.Option(
    "--tokenizer", help="Tokenizer AIPerf counts tokens with (default: the graph's model "
                        "directory or id).")]


class _RichObserver:
    """One progress bar per sweep point: requests finished (or seconds of load) and the phase
    AIPerf is in."""

    def __init__(self, progress: Progress, prefix: str = "") -> None:
        self.progress = progress
        self.prefix = prefix
        self.tasks: dict[SweepPoint, int] = {}
        self.by_time: set[SweepPoint] = set()
        self.profiling_since: dict[SweepPoint, float] = {}

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


def _load_topology(path: Path | None):
    from ..builtin import DEMO_TOPOLOGY
    from ..topology import Topology
    from ..yaml_input import load_model_file

    chosen = path or DEMO_TOPOLOGY
    return load_model_file(Topology, chosen), chosen


def _check_bench_options(topology: Path | None, topology_opt: Path | None,
                         baseline: Path | None, max_regression: float | None,
                         url: str | None) -> str | None:
    """One-line errors for options that do not fit together; the normalized --url."""
    from ..bench.target import check_url

    if (baseline is None) != (max_regression is None):
        raise UserInputError("--baseline and --max-regression go together",
                             key="--baseline" if baseline is None else "--max-regression",
                             fix="give both, e.g. --baseline B.json --max-regression 20")
    if max_regression is not None and max_regression < 0:
        raise UserInputError(f"{max_regression:g} is negative", key="--max-regression",
                             fix="give the allowed regression in percent, e.g. 20")
    if topology is not None and topology_opt is not None and topology != topology_opt:
        raise UserInputError(f"two topologies given ({topology} and --topology {topology_opt})",
                             key="--topology", fix="give one")
    return check_url(url) if url is not None else None


def bench(
    topology: Annotated[Path | None, typer.Argument(
        help="Topology to bring up, benchmark and stop (default: the demo graph).")] = None,
    scenario: ScenarioOpt = ...,
    url: Annotated[str | None, typer.Option(
        "--url", help="Benchmark the graph already running at this URL instead.")] = None,
    topology_opt: Annotated[Path | None, typer.Option(
        "--topology", help="The topology that graph runs: GPU count, model, metrics ports "
                           "(default: the demo graph).")] = None,
    out: OutOpt = None,
    baseline: Annotated[Path | None, typer.Option(
        "--baseline", help="Gate: a results.json to compare against "
                           "(benchmarks/baselines/).")] = None,
    max_regression: Annotated[float | None, typer.Option(
        "--max-regression",
        help="Gate: fail (exit 1) when a metric is this many percent worse.")] = None,
    write_baseline: Annotated[Path | None, typer.Option(
        "--write-baseline", help="Also save the results as a baseline file.")] = None,
    tokenizer: TokenizerOpt = None,
) -> None:
    """Sweep a graph with AIPerf: report (JSON, CSV, Markdown, plots) and optional CI gate."""
    from ..bench.gate import check_compatible, enforce, evaluate, load_baseline
    from ..bench.runner import bench_running, bench_topology, default_out_dir
    from ..bench.scenario import load_scenario

    interrupt_on_termination()  # SIGTERM stops AIPerf's tree and the graph, like Ctrl-C
    url = _check_bench_options(topology, topology_opt, baseline, max_regression, url)
    spec = load_scenario(scenario)
    base = load_baseline(baseline) if baseline is not None else None
    topo, topo_path = _load_topology(topology or topology_opt)
    if base is not None:  # before the first point runs, not after the sweep
        check_compatible(base, spec, topo.name, baseline_source=str(baseline))
    out_dir = (out or default_out_dir(topo.name, spec)).resolve()
    with _progress() as progress:
        observer = _RichObserver(progress)
        if url is not None:
            run = bench_running(topo, spec, out_dir, url=url, topology_file=topo_path,
                                tokenizer=tokenizer, observer=observer)
        else:
            run = bench_topology(topo, spec, out_dir, topology_file=topo_path,
                                 tokenizer=tokenizer, observer=observer,
                                 on_event=lambda text: progress.console.print(text))
    _print_run(run, f"{spec.name} on {topo.name} ({run.result.gpus} GPUs)")
    if write_baseline is not None:
        write_baseline.parent.mkdir(parents=True, exist_ok=True)
        write_baseline.write_text(run.result.model_dump_json(indent=2), encoding="utf-8")
        console.print(f"baseline written: {write_baseline}", markup=False)
    if base is not None and baseline is not None and max_regression is not None:
        verdict = evaluate(run.result, base, max_regression, baseline_source=str(baseline))
        enforce(verdict, str(baseline))
        console.print(f"gate passed: {len(verdict.checks)} checks within {max_regression:g}% "
                      f"of {baseline}", markup=False)
    else:
        console.print(f"next: dis-serve compare graphs/agg-mocker.yaml {topo_path} "
                      f"--scenario {scenario}", markup=False)


def _print_run(run, title: str) -> None:
    """The summary, then exit 1 on an invalid run: it never becomes a baseline nor is gated.
    For a graph `plan --emit` wrote, the report gets the plan-vs-measurement section and the
    ledger the run's valid points."""
    from ..bench.validity import enforce_valid
    from ..plan.ledger import ledger_path
    from ..plan.vs_measured import after_bench

    recorded = after_bench(run.result, run.files.markdown)
    console.print(_summary_table(run.result, title))
    console.print(_cache_line(run.result), markup=False)
    console.print(f"report: {run.files.markdown}  (plots: {run.files.pareto_png.name}, "
                  f"{run.files.latency_png.name}; data: {run.files.json.name}, "
                  f"{run.files.csv.name}; evidence: fingerprint.json)", markup=False)
    if recorded is not None:
        console.print(f"planned graph: {recorded} point(s) added to the ledger "
                      f"{ledger_path()}", markup=False)
    enforce_valid(run.result, str(run.files.markdown))


def compare(
    a: Annotated[Path, typer.Argument(help="Topology A (e.g. graphs/agg-mocker.yaml).")],
    b: Annotated[Path | None, typer.Argument(
        help="Topology B (e.g. graphs/demo.yaml); leave out with --vary.")] = None,
    scenario: ScenarioOpt = ...,
    vary: Annotated[str | None, typer.Option(
        "--vary", help="Arms from one topology differing in one key, e.g. "
                       "router.mode=kv,round-robin.")] = None,
    repeat: Annotated[int, typer.Option(
        "--repeat", min=1, max=20, help="Runs per arm, for the run-to-run spread.")] = 1,
    out: OutOpt = None,
    tokenizer: TokenizerOpt = None,
) -> None:
    """Run one scenario on several arms, one after the other, and put them side by side."""
    from ..bench.ab_report import write_compare_report
    from ..bench.arms import file_arms, parse_vary, vary_arms
    from ..bench.runner import compare_arms
    from ..bench.scenario import load_scenario
    from ..launch.rundir import default_root

    interrupt_on_termination()
    if (vary is None) == (b is None):
        raise UserInputError("give two topologies, or one topology and --vary",
                             key="--vary", fix="e.g. compare graphs/agg-mocker.yaml --vary "
                                               "router.mode=kv,round-robin")
    spec = load_scenario(scenario)
    arms = (vary_arms(a, *parse_vary(vary)) if vary is not None
            else file_arms([a, b]))  # type: ignore[list-item]
    out_dir = (out or default_root() / "compare" /
               f"{'-vs-'.join(arm.slug for arm in arms)}-{spec.name}").resolve()
    with _progress() as progress:
        results = compare_arms(arms, spec, out_dir, repeat=repeat, tokenizer=tokenizer,
                               observer_for=lambda tag: _RichObserver(progress, tag),
                               on_event=lambda text: progress.console.print(text))
    files = write_compare_report(results, out_dir)
    _print_compare(results)
    console.print(f"compare report: {files.markdown}  (plots: "
                  + ", ".join(p.name for p in files.plots) + ")", markup=False)


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


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(bench)
    app.command()(compare)
