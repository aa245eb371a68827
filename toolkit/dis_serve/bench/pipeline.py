"""`bench` and `compare` as pipelines: `run_bench(request) -> BenchOutcome`,
`run_compare(request) -> CompareOutcome` (STYLE 15). Each reads its inputs, measures
(bench/runner), writes its report, runs the after-bench hooks it is given on every measured
run, and judges the result: a point that measured nothing real makes the run invalid, and a
bench with a baseline is gated against it. The outcome carries the verdict; `enforce` turns
it into the exit status, after the caller has shown what was measured.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .ab import ArmRuns
from .ab_report import CompareFiles
from .gate import GateVerdict, enforce, evaluate
from .progress import SweepObserver
from .request import BenchRequest, CompareRequest
from .runner import AfterBench, BenchRun
from .validity import InvalidRunError, PointVerdict, describe, enforce_valid, invalid_points


@dataclass(frozen=True)
class BenchOutcome:
    """One bench: the run (results, report files, hook notes), the topology it read, and
    the verdicts: invalid points, and the gate against the baseline (None: not gated; an
    invalid run is neither gated nor saved as a baseline)."""

    run: BenchRun
    topology_file: Path
    invalid: tuple[PointVerdict, ...]
    gate: GateVerdict | None
    baseline: Path | None
    baseline_written: Path | None

    def enforce(self) -> None:
        """InvalidRunError for an invalid run, RegressionError for a failed gate."""
        enforce_valid(self.run.result, str(self.run.files.markdown))
        if self.gate is not None:
            enforce(self.gate, str(self.baseline))


def load_topology(path: Path | None):  # -> tuple[Topology, Path]
    """The topology at `path`, or the demo graph, and the file it came from."""
    from ..builtin import DEMO_TOPOLOGY
    from ..inputs.yaml_input import load_model_file
    from ..topology import Topology

    chosen = path or DEMO_TOPOLOGY
    return load_model_file(Topology, chosen), chosen


def run_bench(request: BenchRequest, *, after_bench: Sequence[AfterBench] = (),
              observer: SweepObserver | None = None,
              on_event: Callable[[str], None] | None = None) -> BenchOutcome:
    """Sweep the graph the request names (brought up here, or running at its `url`), write
    the report, run the hooks, and judge it; a baseline that cannot gate this sweep is
    refused before the first point runs."""
    from .gate import check_compatible, load_baseline
    from .runner import bench_running, bench_topology, default_out_dir
    from .scenario import load_scenario

    spec = load_scenario(request.scenario)
    base = load_baseline(request.baseline) if request.baseline is not None else None
    topo, topo_path = load_topology(request.topology_file)
    if base is not None:
        check_compatible(base, spec, topo.name, baseline_source=str(request.baseline))
    out_dir = (request.out or default_out_dir(topo.name, spec)).resolve()
    if request.url is not None:
        run = bench_running(topo, spec, out_dir, url=request.url, topology_file=topo_path,
                            tokenizer=request.tokenizer, observer=observer,
                            after_bench=after_bench)
    else:
        run = bench_topology(topo, spec, out_dir, topology_file=topo_path,
                             tokenizer=request.tokenizer, observer=observer,
                             on_event=on_event, after_bench=after_bench)
    invalid = tuple(invalid_points(run.result))
    written = gate = None
    if not invalid:
        if request.write_baseline is not None:
            written = request.write_baseline
            written.parent.mkdir(parents=True, exist_ok=True)
            written.write_text(run.result.model_dump_json(indent=2), encoding="utf-8")
        if base is not None and request.max_regression is not None:
            gate = evaluate(run.result, base, request.max_regression,
                            baseline_source=str(request.baseline))
    return BenchOutcome(run=run, topology_file=topo_path, invalid=invalid, gate=gate,
                        baseline=request.baseline, baseline_written=written)


@dataclass(frozen=True)
class CompareOutcome:
    """The arms side by side, the report's files, and the runs that measured nothing real."""

    arms: list[ArmRuns]
    files: CompareFiles
    invalid: tuple[str, ...]
    """One line per invalid run: its directory and why."""

    def enforce(self) -> None:
        """InvalidRunError when any run of any arm is invalid: its figures compare nothing."""
        if self.invalid:
            runs = sum(len(arm.runs) for arm in self.arms)
            raise InvalidRunError(f"{len(self.invalid)} of {runs} run(s) invalid ("
                                  + "; ".join(self.invalid) + f"); see {self.files.markdown}")


def run_compare(request: CompareRequest, *, after_bench: Sequence[AfterBench] = (),
                observer_for: Callable[[str], SweepObserver] | None = None,
                on_event: Callable[[str], None] | None = None) -> CompareOutcome:
    """Every arm `repeat` times on a fresh graph (bench/runner.compare_arms), the report."""
    from ..launch.rundir import default_root
    from .ab_report import write_compare_report
    from .arms import file_arms, parse_vary, vary_arms
    from .runner import compare_arms
    from .scenario import load_scenario

    spec = load_scenario(request.scenario)
    arms = (vary_arms(request.a, *parse_vary(request.vary)) if request.vary is not None
            else file_arms([request.a, request.b]))  # type: ignore[list-item]
    out_dir = (request.out or default_root() / "compare" /
               f"{'-vs-'.join(arm.slug for arm in arms)}-{spec.name}").resolve()
    results = compare_arms(arms, spec, out_dir, repeat=request.repeat,
                           tokenizer=request.tokenizer, observer_for=observer_for,
                           on_event=on_event, after_bench=after_bench)
    invalid = tuple(f"{where}: {describe(bad)}" for arm in results
                    for where, result in zip(arm.run_dirs, arm.runs, strict=True)
                    if (bad := invalid_points(result)))
    return CompareOutcome(arms=results, files=write_compare_report(results, out_dir),
                          invalid=invalid)
