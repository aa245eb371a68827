"""The CI gate: a fresh sweep against a saved baseline (a results.json from an earlier run).

Every gated metric of every point the two share is compared in the direction that matters
(throughput down, latency up, errors up); the gate fails when any of them moved the wrong way
by more than `--max-regression` percent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..errors import DisServeError, UserInputError
from .metrics import METRICS, BenchResult
from .scenario import Scenario
from .validity import describe, invalid_points


class RegressionError(DisServeError):
    """A gated metric regressed past the allowed percentage. Exit code 1."""

    exit_code = 1


@dataclass(frozen=True)
class Check:
    load: str
    metric: str
    unit: str
    baseline: float
    current: float
    regression_pct: float  # > 0: worse than the baseline; inf: from zero to non-zero errors

    def describe(self) -> str:
        change = ("from 0" if math.isinf(self.regression_pct)
                  else f"{self.regression_pct:.1f}% worse")
        return (f"{self.metric} at {self.load}: {self.baseline:.4g} -> {self.current:.4g} "
                f"{self.unit} ({change})")


@dataclass(frozen=True)
class GateVerdict:
    max_regression_pct: float
    checks: list[Check]

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.regression_pct > self.max_regression_pct]

    @property
    def passed(self) -> bool:
        return not self.failures


def load_baseline(path: Path) -> BenchResult:
    """The baseline in `path`; refused when any of its points is invalid (comparing against
    a run that generated nothing would pass every later run that generates anything)."""
    if not path.is_file():
        raise UserInputError("baseline file not found", source=str(path),
                             fix="write one with --write-baseline FILE from a good run")
    try:
        baseline = BenchResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (ValueError, ValidationError):
        raise UserInputError("not a dis-serve results file", source=str(path),
                             fix="use a results.json written by `dis-serve bench`") from None
    bad = invalid_points(baseline)
    if bad:
        raise UserInputError(f"the baseline is an invalid run ({describe(bad)})",
                             source=str(path),
                             fix="write a new baseline from a valid run with --write-baseline")
    return baseline


def _regression(baseline: float, current: float, higher_is_better: bool) -> float:
    if higher_is_better:
        return 0.0 if baseline <= 0 else 100.0 * (baseline - current) / baseline
    if baseline == 0:
        return math.inf if current > 0 else 0.0
    return 100.0 * (current - baseline) / baseline


def check_compatible(baseline: BenchResult, scenario: Scenario, topology: str, *,
                     baseline_source: str) -> None:
    """Refuse a baseline of another scenario, topology or sweep: called before the sweep
    runs, so a wrong baseline costs nothing."""
    if scenario.name != baseline.scenario.name:
        raise UserInputError(
            f"baseline is for scenario '{baseline.scenario.name}', this run is "
            f"'{scenario.name}'", source=baseline_source,
            fix="gate against a baseline of the same scenario")
    if topology != baseline.topology:
        raise UserInputError(
            f"baseline is for topology '{baseline.topology}', this run is "
            f"'{topology}'", source=baseline_source,
            fix="gate against a baseline of the same topology")
    if not set(scenario.points()) & {p.point for p in baseline.points}:
        raise UserInputError("baseline shares no sweep point with this run",
                             source=baseline_source, fix="rerun the baseline's sweep")


def evaluate(current: BenchResult, baseline: BenchResult, max_regression_pct: float, *,
             baseline_source: str) -> GateVerdict:
    check_compatible(baseline, current.scenario, current.topology,
                     baseline_source=baseline_source)
    now = {p.point: p for p in current.points}
    shared = [p for p in baseline.points if p.point in now]
    if not shared:
        raise UserInputError("baseline shares no sweep point with this run",
                             source=baseline_source, fix="rerun the baseline's sweep")
    checks = []
    for base in shared:
        cur = now[base.point]
        for metric in METRICS:
            if not metric.gated:
                continue
            b, c = metric.get(base), metric.get(cur)
            if b is None or c is None:
                continue
            checks.append(Check(load=base.point.label, metric=metric.key, unit=metric.unit,
                                baseline=b, current=c,
                                regression_pct=_regression(b, c, metric.higher_is_better)))
    return GateVerdict(max_regression_pct=max_regression_pct, checks=checks)


def enforce(verdict: GateVerdict, baseline_source: str) -> None:
    """Raise RegressionError listing every metric past the limit."""
    failures = verdict.failures
    if not failures:
        return
    lines = "\n".join(f"  {c.describe()}" for c in failures)
    raise RegressionError(
        f"{len(failures)} metric(s) regressed by more than {verdict.max_regression_pct:g}% "
        f"against {baseline_source}:\n{lines}")
