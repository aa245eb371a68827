"""`bench` and `compare` end to end: find or start the graph, sweep it, write the report.

A topology given without `--url` is brought up with the launcher, benchmarked and stopped
again (also on failure or Ctrl+C); with `--url` the running graph is used as it is and the
topology only supplies the GPU count, the served model and the workers' metrics ports.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..topology import Topology
from .metrics import BenchResult
from .progress import SweepObserver
from .report import ReportFiles, write_report
from .scenario import Scenario
from .sweep import run_sweep
from .target import BenchTarget, check_endpoint, make_target, plan_of, resolve_tokenizer


@dataclass(frozen=True)
class BenchRun:
    result: BenchResult
    files: ReportFiles
    out_dir: Path


def default_out_dir(topology_name: str, scenario: Scenario) -> Path:
    from ..launch.rundir import default_root

    return default_root() / "bench" / f"{topology_name}-{scenario.name}"


def bench_running(topo: Topology, scenario: Scenario, out_dir: Path, *, url: str,
                  topology_file: Path | None, tokenizer: str | None = None,
                  observer: SweepObserver | None = None) -> BenchRun:
    """Sweep a graph that is already running at `url`."""
    plan = plan_of(topo)
    check_endpoint(url.rstrip("/"), plan.model_name,
                   topology_file=str(topology_file) if topology_file else None)
    target = make_target(topo, url=url, plan=plan,
                         tokenizer=resolve_tokenizer(topo, plan, tokenizer),
                         topology_file=topology_file)
    return _sweep_and_report(scenario, target, out_dir, observer)


def bench_topology(topo: Topology, scenario: Scenario, out_dir: Path, *,
                   topology_file: Path | None, tokenizer: str | None = None,
                   observer: SweepObserver | None = None,
                   on_event: Callable[[str], None] | None = None,
                   run_root: Path | None = None) -> BenchRun:
    """Bring the graph up, sweep it, bring it down (whatever happens in between)."""
    from ..launch.graph import start_graph

    if on_event:
        on_event(f"starting graph {topo.name} ({topo.mode.value}, {topo.total_gpus} GPUs)")
    with start_graph(topo, run_root=run_root) as graph:
        if on_event:
            on_event(f"graph {topo.name} ready at {graph.endpoint}")
        check_endpoint(graph.endpoint, graph.model_name,
                       topology_file=str(topology_file) if topology_file else None)
        target = make_target(topo, url=graph.endpoint, plan=graph.plan,
                             tokenizer=tokenizer or graph.plan.model_path,
                             topology_file=topology_file)
        try:
            result = run_sweep(scenario, target, out_dir, observer)
        finally:
            if on_event:
                on_event(f"stopping graph {topo.name}")
    # Plots are drawn after the graph is down: nothing left to measure, CPU back.
    return BenchRun(result=result, files=write_report(result, out_dir), out_dir=out_dir)


def _sweep_and_report(scenario: Scenario, target: BenchTarget, out_dir: Path,
                      observer: SweepObserver | None) -> BenchRun:
    result = run_sweep(scenario, target, out_dir, observer)
    files = write_report(result, out_dir)
    return BenchRun(result=result, files=files, out_dir=out_dir)
