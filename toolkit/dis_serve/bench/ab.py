"""Arms side by side: each metric per arm over its repetitions, the difference to the first
arm, and whether that difference is larger than the run-to-run spread.

A difference counts as real only when the arms' ranges over their repetitions do not
overlap (every run of one arm beat every run of the other). With one repetition there is no
spread to compare against, and the report says so instead of guessing.
"""

from __future__ import annotations

from collections.abc import Callable
from statistics import fmean

from pydantic import BaseModel, ConfigDict, Field

from .metrics import METRICS_BY_KEY, BenchResult, PointResult
from .scenario import SweepPoint

AB_KEYS = ("ttft_p50_ms", "itl_p50_ms", "request_throughput", "tokens_per_s_per_gpu",
           "goodput_per_gpu", "prefix_cache_hit_pct", "errors")


class Spread(BaseModel):
    """One figure over an arm's repetitions."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    mean: float
    low: float
    high: float
    runs: int

    def beyond(self, other: Spread) -> bool | None:
        """True when the two ranges do not overlap; None without repetitions."""
        if self.runs < 2 or other.runs < 2:
            return None
        return self.low > other.high or self.high < other.low


def spread(values: list[float | None]) -> Spread | None:
    found = [v for v in values if v is not None]
    if not found:
        return None
    low, high = min(found), max(found)
    # fmean of equal values can land a rounding step outside them (3 x 63.5 -> 63.500...01),
    # and a mean outside its own range makes negative error bars that matplotlib refuses.
    return Spread(mean=min(max(fmean(found), low), high), low=low, high=high, runs=len(found))


class ArmRuns(BaseModel):
    """An arm and the results of its repetitions (one sweep each, on a fresh graph)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    label: str
    slug: str
    topology_file: str
    gpus: int
    runs: list[BenchResult]
    run_dirs: list[str] = Field(description="Each repetition's output directory.")

    def at(self, point: SweepPoint) -> list[PointResult]:
        return [p for run in self.runs for p in run.points if p.point == point]


class Cell(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    arm: str
    value: Spread | None
    change_pct: float | None = Field(description="Mean against the first arm's mean.")
    beyond_spread: bool | None = Field(description="Ranges apart (see module doc).")


class Row(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    load: str
    metric: str
    cells: list[Cell]


def _row(arms: list[ArmRuns], point: SweepPoint, label: str, metric: str,
         get: Callable[[PointResult], float | None]) -> Row:
    values = [spread([get(p) for p in arm.at(point)]) for arm in arms]
    base = values[0]
    cells = []
    for arm, value in zip(arms, values, strict=True):
        change = beyond = None
        if value is not None and base is not None and arm is not arms[0]:
            change = 100.0 * (value.mean - base.mean) / base.mean if base.mean else None
            beyond = value.beyond(base)
        cells.append(Cell(arm=arm.label, value=value, change_pct=change, beyond_spread=beyond))
    return Row(load=label, metric=metric, cells=cells)


def compare_rows(arms: list[ArmRuns]) -> list[Row]:
    """Every reported metric at every load point of the first arm's scenario."""
    points = arms[0].runs[0].scenario.points()
    return [_row(arms, point, point.display_value, key, METRICS_BY_KEY[key].get)
            for point in points for key in AB_KEYS]


class BucketVerdict(BaseModel):
    """Which arm serves one input-length bucket with the most goodput per GPU."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    load: str
    bucket: str
    row: Row
    winner: str
    decided: bool | None = Field(description="The winner's range clears every other arm's; "
                                             "None without repetitions.")
    tie: bool = Field(
        default=False,
        description="The arms are less than one good request apart (per second per GPU over "
                    "the run): under a replayed trace both get the same arrivals, so equal "
                    "good-request counts differ only by the runs' lengths.")


def bucket_verdicts(arms: list[ArmRuns]) -> list[BucketVerdict]:
    """Goodput per GPU under the SLA by input-length bucket, per point, and the winner."""
    verdicts = []
    for point in arms[0].runs[0].scenario.points():
        labels = dict.fromkeys(b.label for arm in arms for p in arm.at(point)
                               for b in p.input_buckets)
        for label in [*labels, "all"]:
            row = _row(arms, point, point.display_value, "goodput_per_gpu",
                       _bucket_getter(label))
            present = [c for c in row.cells if c.value is not None]
            if len(present) < 2:
                continue
            best = max(present, key=lambda c: c.value.mean)
            apart = [best.value.beyond(c.value) for c in present if c is not best]
            decided = None if None in apart else all(apart)
            margin = min(best.value.mean - c.value.mean for c in present if c is not best)
            verdicts.append(BucketVerdict(
                load=point.display_value, bucket=label, row=row, winner=best.arm,
                decided=decided, tie=margin < _one_request(arms, point)))
    return verdicts


def _one_request(arms: list[ArmRuns], point: SweepPoint) -> float:
    """Goodput per GPU that one request more or less makes, in the longest-resolved run."""
    return max((1.0 / (p.aiperf.duration_s * p.gpus) for arm in arms for p in arm.at(point)
                if p.aiperf.duration_s > 0), default=0.0)


def _bucket_getter(label: str) -> Callable[[PointResult], float | None]:
    def get(p: PointResult) -> float | None:
        if label == "all":
            return METRICS_BY_KEY["goodput_per_gpu"].get(p)
        for bucket in p.input_buckets:
            if bucket.label == label:
                return bucket.goodput_per_gpu
        return 0.0  # the bucket exists in the workload; this run served none of it well
    return get
