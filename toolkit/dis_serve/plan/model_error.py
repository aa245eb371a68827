"""How far the planner's model has been from measurements near a plan: the error each mode's
prediction carries, from the measured cases nearest it.

The measured cases are data (`builtin/measured_error.csv`, written by the benchmarks that
set plans beside published measurements): aggregated serving against NVIDIA's TensorRT-LLM
throughput tables and MLPerf's offline, Server and Interactive runs
(`benchmarks/plan_vs_published.py --write-errors`), disaggregated serving against the
published aggregated-against-disaggregated comparisons, whose measured margin our plan of
the same setup reproduces or not (`benchmarks/published_verdicts.py --write-errors`); and
the user's own: every `bench` of a planned graph in the ledger (`plan.ledger`).

A case's error is |predicted / measured - 1|. Near the cases the model has been measured
on, its error is theirs; away from them, nothing was measured, so the error grows with the
distance: the error at a plan is the root-mean-square error of its nearest measured cases of
the same mode plus `slope` times the distance to the nearest. The distance counts each factor e
between the plan's and the case's prompt length, output length, planned inter-token
latency, model size, GPU memory bandwidth and tensor-parallel size as one, and a different
arrival process (closed loop or Poisson), weight format, engine (the published disaggregated
comparisons ran vLLM) or performance model (the roofline, where AIConfigurator cannot
answer) as one each; the slope is the median, over pairs of
measured cases, of how much their errors differ per unit of distance between them.
"""

from __future__ import annotations

import csv
import math
import statistics
from dataclasses import dataclass
from functools import cache
from itertools import combinations
from pathlib import Path

from ..engines import planned_engine
from ..hardware.catalog import GPUS, GpuType, find_known_model
from ..topology import Mode
from .perf_model import PerfSource

MEASURED_ERROR_FILE = Path(__file__).resolve().parents[1] / "builtin" / "measured_error.csv"
# A plan's error is the root-mean-square of its nearest few cases' (one odd case does not
# decide).
NEAREST_CASES = 3
# The engine dis-serve plans for; published comparisons on another one are that much further.
PLANNED_ENGINE = planned_engine().backend.value


@dataclass(frozen=True)
class Point:
    """Where a prediction sits, in the terms measured cases are compared by."""

    mode: Mode
    model: str
    gpu: str
    dtype: str
    tp: int | None
    isl: float
    osl: float
    itl_ms: float
    arrival: str
    engine: str = PLANNED_ENGINE
    performance_model: str = PerfSource.AICONFIGURATOR.value
    """What predicted it (every shipped case is AIConfigurator's; a roofline plan is further)."""


@dataclass(frozen=True)
class MeasuredCase:
    point: Point
    ratio: float
    """Predicted over measured (for a comparison: our disaggregated-over-aggregated ratio
    over the measured one)."""
    source: str

    @property
    def error(self) -> float:
        return abs(self.ratio - 1.0)


@dataclass(frozen=True)
class ModeError:
    """The error one mode's prediction carries at a plan, and the evidence behind it."""

    mode: Mode
    error: float
    distance: float
    """To the nearest measured case (0: the plan is one)."""
    nearest: tuple[MeasuredCase, ...]


def _log_gap(a: float | None, b: float | None) -> float:
    return abs(math.log(a / b)) if a and b else 0.0


def _params(model: str) -> float | None:
    known = find_known_model(model)
    return known.architecture.params_billion if known else None


def _bandwidth(gpu: str) -> float | None:
    try:
        return GPUS[GpuType(gpu)].bandwidth_tbps
    except ValueError:
        return None


def distance(a: Point, b: Point) -> float:
    """How far apart two points are, in factors e and mismatches (see the module's text)."""
    return (_log_gap(a.isl, b.isl) + _log_gap(a.osl, b.osl) + _log_gap(a.itl_ms, b.itl_ms)
            + _log_gap(_params(a.model), _params(b.model))
            + _log_gap(_bandwidth(a.gpu), _bandwidth(b.gpu)) + _log_gap(a.tp, b.tp)
            + (a.arrival != b.arrival) + (a.dtype != b.dtype) + (a.engine != b.engine)
            + (a.performance_model != b.performance_model))


def slope(cases: list[MeasuredCase]) -> float:
    """The median change of error per unit of distance between measured cases."""
    rates = [abs(x.error - y.error) / d for x, y in combinations(cases, 2)
             if (d := distance(x.point, y.point)) > 0]
    return statistics.median(rates) if rates else 0.0


def mode_error(point: Point, cases: list[MeasuredCase], per_unit: float) -> ModeError | None:
    """The error of `point`'s mode there (None: that mode was never measured)."""
    same = sorted((c for c in cases if c.point.mode is point.mode),
                  key=lambda c: distance(point, c.point))
    if not same:
        return None
    nearest = tuple(same[:NEAREST_CASES])
    gap = distance(point, nearest[0].point)
    typical = math.sqrt(statistics.fmean(c.error**2 for c in nearest))
    return ModeError(point.mode, typical + per_unit * gap, gap, nearest)


def _float(value: str) -> float | None:
    return float(value) if value else None


@cache
def builtin_cases(path: Path = MEASURED_ERROR_FILE) -> tuple[MeasuredCase, ...]:
    """The measured cases the benchmarks recorded (none when the file is missing)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ()
    return tuple(MeasuredCase(Point(
        mode=Mode(row["mode"]), model=row["model"], gpu=row["gpu"], dtype=row["dtype"],
        tp=int(row["tp"]) if row["tp"] else None, isl=float(row["isl"]),
        osl=float(row["osl"]), itl_ms=_float(row["itl_ms"]) or 0.0,
        arrival=row["arrival"], engine=row["engine"]), float(row["ratio"]), row["source"])
        for row in csv.DictReader(text.splitlines()))


def ledger_cases(entries) -> list[MeasuredCase]:
    """The user's own measurements: each benchmarked plan's sweep point nearest its planned
    rate (`plan.ledger`), its planned throughput over the measured one."""
    cases = []
    for e in entries:
        predicted, measured = e.predicted.requests_per_s, e.measured.requests_per_s
        if not (e.nearest_to_plan and predicted and measured):
            continue
        arrival = "offline" if e.point.startswith("concurrency") else "poisson"
        cases.append(MeasuredCase(Point(
            mode=Mode(e.mode), model=e.model, gpu=e.gpu, dtype=e.dtype, tp=None, isl=e.isl,
            osl=e.osl, itl_ms=e.predicted.itl_mean_ms or 0.0, arrival=arrival,
            performance_model=e.performance_model),
            predicted / measured, f"ledger: {e.deployment}, {e.point} ({e.recorded_at})"))
    return cases
