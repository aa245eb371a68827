"""Two benchmark runs' results side by side: every metric of every sweep point both ran, with
the change from A to B (`dis-serve diff` prints them under the fingerprints' differences)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .metrics import METRICS
from .report import RESULTS_JSON, read_result


@dataclass(frozen=True)
class ResultRow:
    load: str
    metric: str
    unit: str
    a: float | None
    b: float | None

    @property
    def change_pct(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return 100.0 * (self.b - self.a) / self.a


def diff_results(a_dir: Path, b_dir: Path) -> list[ResultRow]:
    """Every metric of every sweep point both runs share; [] unless both are bench runs."""
    if not (a_dir / RESULTS_JSON).is_file() or not (b_dir / RESULTS_JSON).is_file():
        return []
    ra, rb = read_result(a_dir / RESULTS_JSON), read_result(b_dir / RESULTS_JSON)
    b_points = {p.point: p for p in rb.points}
    rows = []
    for pa in ra.points:
        pb = b_points.get(pa.point)
        if pb is None:
            continue
        rows += [ResultRow(load=pa.point.label, metric=m.title, unit=m.unit, a=m.get(pa),
                           b=m.get(pb)) for m in METRICS]
    return rows
