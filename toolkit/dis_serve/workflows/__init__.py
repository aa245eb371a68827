"""The pipelines as commands and benchmarks run them: bench's and compare's
(bench/pipeline.py) and chaos's (chaos/runner.py), each with the after-bench hooks every
measured run gets.

The hooks live in the layers above bench (the ledger of a planned graph is the planner's:
plan/vs_measured.py), and bench imports none of them, so they are bound here, above bench,
plan and chaos: `dis-serve bench`, `compare`, `chaos` and the benchmarks call these, and a
run of a planned graph lands in the ledger whichever of them measured it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..plan.vs_measured import record_planned_run

if TYPE_CHECKING:
    from ..bench.ab import ArmRuns
    from ..bench.arms import Arm
    from ..bench.pipeline import BenchOutcome, CompareOutcome
    from ..bench.progress import SweepObserver
    from ..bench.request import BenchRequest, CompareRequest
    from ..bench.scenario import Scenario
    from ..chaos.outcome import ChaosOutcome
    from ..chaos.request import ChaosRequest

# What follows every measured run, in order.
AFTER_BENCH = (record_planned_run,)
Say = Callable[[str], None]


def run_bench(request: BenchRequest, *, observer: SweepObserver | None = None,
              on_event: Say | None = None) -> BenchOutcome:
    from ..bench import pipeline

    return pipeline.run_bench(request, after_bench=AFTER_BENCH, observer=observer,
                              on_event=on_event)


def run_compare(request: CompareRequest, *,
                observer_for: Callable[[str], SweepObserver] | None = None,
                on_event: Say | None = None) -> CompareOutcome:
    from ..bench import pipeline

    return pipeline.run_compare(request, after_bench=AFTER_BENCH, observer_for=observer_for,
                                on_event=on_event)


def compare_arms(arms: list[Arm], scenario: Scenario, out_dir: Path, *, repeat: int,
                 tokenizer: str | None = None,
                 observer_for: Callable[[str], SweepObserver] | None = None,
                 on_event: Say | None = None) -> list[ArmRuns]:
    """Arms built in code (a benchmark's), run as `compare` runs them."""
    from ..bench import runner

    return runner.compare_arms(arms, scenario, out_dir, repeat=repeat, tokenizer=tokenizer,
                               observer_for=observer_for, on_event=on_event,
                               after_bench=AFTER_BENCH)


def run_chaos(request: ChaosRequest, *, on_event: Say | None = None) -> ChaosOutcome:
    from ..chaos import runner

    return runner.run_chaos(request, after_bench=AFTER_BENCH, on_event=on_event)
