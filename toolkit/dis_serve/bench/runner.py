"""`bench` and `compare` end to end: find or start the graph, sweep it, write the report.

A topology given without `--url` is brought up with the launcher, benchmarked and stopped
again (also on failure or Ctrl+C); with `--url` the running graph is used as it is and the
topology only supplies the GPU count, the served model and the workers' metrics ports.

The first point on a graph brought up here starts on cold prefix caches; the next ones on
what earlier points left, unless the scenario asks for `reset_prefix_cache`: then the graph
is restarted before every point, so each point is cold and points compare fairly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserInputError
from ..topology import Topology
from .ab import ArmRuns
from .arms import Arm
from .metrics import BenchResult
from .progress import SweepObserver
from .report import ReportFiles, write_report
from .scenario import CacheState, Scenario, SweepPoint
from .sweep import run_sweep
from .target import (
    BenchTarget,
    check_endpoint,
    make_target,
    plan_of,
    resolve_tokenizer,
    tls_for,
)

if TYPE_CHECKING:
    from ..launch.graph import RunningGraph


@dataclass(frozen=True)
class BenchRun:
    result: BenchResult
    files: ReportFiles
    out_dir: Path
    topology_digest: str
    """The digest of the topology measured (an arm of `compare --vary` is its file's
    topology with one key changed)."""
    notes: tuple[str, ...] = ()
    """What the after-bench hooks said of the run, one line each."""


# What follows every measured run once its report is written (vLLM's `after_bench`): a side
# effect such as the planner's ledger, and a line for the user, or None. Layers above bench
# bind them (dis_serve/workflows), so bench knows nothing of what they do.
AfterBench = Callable[[BenchRun], str | None]


def reported(result: BenchResult, target: BenchTarget, out_dir: Path,
             after_bench: Sequence[AfterBench]) -> BenchRun:
    """The run with its report written and its hooks run, in order."""
    run = BenchRun(result=result, files=write_report(result, out_dir), out_dir=out_dir,
                   topology_digest=target.topology_digest)
    notes = tuple(note for hook in after_bench if (note := hook(run)) is not None)
    return replace(run, notes=notes)


def default_out_dir(topology_name: str, scenario: Scenario) -> Path:
    from ..launch.rundir import default_root

    return default_root() / "bench" / f"{topology_name}-{scenario.name}"


def check_trace_fits_model(topo: Topology, scenario: Scenario) -> None:
    """A trace's requests must fit the model the graph serves: refused before AIPerf runs."""
    if scenario.trace is None:
        return
    from ..inputs.mooncake_trace import check_trace, check_trace_fits

    rows = check_trace(scenario.trace.file)
    check_trace_fits(rows, scenario.trace.file, max_input_tokens=topo.model.max_input_tokens,
                     max_output_tokens=topo.model.max_output_tokens)


def bench_running(topo: Topology, scenario: Scenario, out_dir: Path, *, url: str,
                  topology_file: Path | None, tokenizer: str | None = None,
                  observer: SweepObserver | None = None,
                  after_bench: Sequence[AfterBench] = ()) -> BenchRun:
    """Sweep a graph that is already running at `url`."""
    check_trace_fits_model(topo, scenario)
    if scenario.reset_prefix_cache:
        raise UserInputError(
            "reset_prefix_cache restarts the workers, which needs dis-serve to own the graph",
            key="--url", fix="drop --url so bench brings the topology up itself, or set "
                             "reset_prefix_cache: false in the scenario")
    plan = plan_of(topo)
    check_endpoint(url.rstrip("/"), plan.model_name,
                   topology_file=str(topology_file) if topology_file else None,
                   tls=tls_for(url, plan))
    target = make_target(topo, url=url, plan=plan,
                         tokenizer=resolve_tokenizer(topo, plan, tokenizer),
                         topology_file=topology_file)
    record_fingerprint(out_dir, "bench", {"topology": (topo, topology_file)}, scenario)
    return measure(scenario, target, out_dir, observer=observer, after_bench=after_bench)


def measure(scenario: Scenario, target: BenchTarget, out_dir: Path, *,
            observer: SweepObserver | None = None,
            after_bench: Sequence[AfterBench] = ()) -> BenchRun:
    """Sweep a target that answers (someone else started it), report, run the hooks."""
    return reported(run_sweep(scenario, target, out_dir, observer), target, out_dir,
                    after_bench)


def bench_topology(topo: Topology, scenario: Scenario, out_dir: Path, *,
                   topology_file: Path | None, tokenizer: str | None = None,
                   observer: SweepObserver | None = None,
                   on_event: Callable[[str], None] | None = None,
                   run_root: Path | None = None,
                   after_bench: Sequence[AfterBench] = ()) -> BenchRun:
    """Bring the graph up, sweep it, bring it down (whatever happens in between)."""
    check_trace_fits_model(topo, scenario)
    say = on_event or (lambda text: None)
    record_fingerprint(out_dir, "bench", {"topology": (topo, topology_file)}, scenario)
    graph = _OwnedGraph(topo, run_root, say)
    try:
        running = graph.start()
        check_endpoint(running.endpoint, running.model_name,
                       topology_file=str(topology_file) if topology_file else None,
                       tls=running.plan.endpoint_tls)
        target = make_target(topo, url=running.endpoint, plan=running.plan,
                             tokenizer=tokenizer or running.plan.model_path,
                             topology_file=topology_file)
        result = run_sweep(scenario, target, out_dir, observer,
                           before_point=graph.before_point(scenario.reset_prefix_cache))
    finally:
        graph.stop()
    # Plots are drawn after the graph is down: nothing left to measure, CPU back.
    return reported(result, target, out_dir, after_bench)


class _OwnedGraph:
    """The graph a benchmark brought up, restarted between points when asked."""

    def __init__(self, topo: Topology, run_root: Path | None,
                 say: Callable[[str], None]) -> None:
        self.topo, self.run_root, self.say = topo, run_root, say
        self.running: RunningGraph | None = None
        self.served_points = 0

    def start(self) -> RunningGraph:
        from ..launch.graph import start_graph

        self.say(f"starting graph {self.topo.name} ({self.topo.mode.value}, "
                 f"{self.topo.total_gpus} GPUs)")
        self.running = start_graph(self.topo, run_root=self.run_root)
        self.served_points = 0
        self.say(f"graph {self.topo.name} ready at {self.running.endpoint}")
        return self.running

    def stop(self) -> None:
        if self.running is not None:
            self.say(f"stopping graph {self.topo.name}")
            self.running.stop()
            self.running = None

    def before_point(self, reset: bool) -> Callable[[SweepPoint], CacheState]:
        def prepare(point: SweepPoint) -> CacheState:
            if self.served_points and reset:
                self.stop()
                self.start()
            self.served_points += 1
            return CacheState.COLD if self.served_points == 1 else CacheState.WARM
        return prepare


def record_fingerprint(out_dir: Path, command: str,
                       topologies: dict[str, tuple[Topology, Path | None]],
                       scenario: Scenario) -> None:
    """fingerprint.json: what produced this output directory (see evidence/fingerprint)."""
    from ..evidence.fingerprint import capture, write_fingerprint

    trace = {"trace": scenario.trace.file} if scenario.trace is not None else {}
    write_fingerprint(out_dir, capture(command, topologies, inputs=scenario, input_files=trace))


def compare_arms(arms: list[Arm], scenario: Scenario, out_dir: Path, *, repeat: int,
                 tokenizer: str | None = None,
                 observer_for: Callable[[str], SweepObserver] | None = None,
                 on_event: Callable[[str], None] | None = None,
                 run_root: Path | None = None,
                 after_bench: Sequence[AfterBench] = ()) -> list[ArmRuns]:
    """Every arm `repeat` times, each run on a freshly started graph. Repetitions are
    interleaved (A B A B ...) so a slow drift of the machine does not favour one arm. Each
    run's hook notes go to `on_event`."""
    record_fingerprint(out_dir, "compare",
                       {arm.slug: (arm.topology, arm.topology_file) for arm in arms}, scenario)
    runs: dict[str, list[BenchRun]] = {arm.slug: [] for arm in arms}
    for rep in range(1, repeat + 1):
        for arm in arms:
            where = out_dir / arm.slug / (f"rep-{rep}" if repeat > 1 else "")
            tag = f"{arm.label}" + (f" #{rep}" if repeat > 1 else "") + ": "
            run = bench_topology(
                arm.topology, scenario, where.resolve(), topology_file=arm.topology_file,
                tokenizer=tokenizer, observer=observer_for(tag) if observer_for else None,
                on_event=on_event, run_root=run_root, after_bench=after_bench)
            runs[arm.slug].append(run)
            for note in run.notes if on_event else ():
                on_event(tag + note)
    return [ArmRuns(label=arm.label, slug=arm.slug, topology_file=str(arm.topology_file),
                    gpus=arm.topology.total_gpus, runs=[r.result for r in runs[arm.slug]],
                    run_dirs=[str(r.out_dir) for r in runs[arm.slug]])
            for arm in arms]
