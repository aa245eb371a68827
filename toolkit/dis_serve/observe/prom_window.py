"""Prometheus text pages and what changed between two of them: counter increases, and
quantiles and means of histograms over the window, computed the way PromQL's `increase` and
`histogram_quantile` do (a counter that went down was reset: its new value is the increase).
Parsing is prometheus_client's own parser. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

Where = Mapping[str, str] | None


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Page:
    """One scrape of one `/metrics` endpoint."""

    samples: tuple[Sample, ...] = field(default_factory=tuple)

    def select(self, name: str, where: Where = None) -> list[Sample]:
        return [s for s in self.samples if s.name == name
                and all(s.labels.get(k) == v for k, v in (where or {}).items())]

    def total(self, name: str, where: Where = None) -> float | None:
        """The sum over every matching series; None when there is none."""
        found = self.select(name, where)
        return sum(s.value for s in found) if found else None

    def by_label(self, name: str, label: str, where: Where = None) -> dict[str, float]:
        sums: dict[str, float] = {}
        for s in self.select(name, where):
            key = s.labels.get(label, "")
            sums[key] = sums.get(key, 0.0) + s.value
        return sums

    def names(self) -> set[str]:
        return {s.name for s in self.samples}


def parse_page(text: str) -> Page:
    """Every sample of a Prometheus text page; an empty page if the text is not one."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        return Page(tuple(Sample(s.name, dict(s.labels), float(s.value))
                          for family in text_string_to_metric_families(text)
                          for s in family.samples))
    except ValueError:
        return Page()


def increase(before: Page, after: Page, name: str, where: Where = None) -> float | None:
    """How much a counter (summed over its series) grew; None if the page lacks it."""
    now = after.total(name, where)
    if now is None:
        return None
    then = before.total(name, where) or 0.0
    return now - then if now >= then else now


def _bucket_increase(before: Page, after: Page, name: str,
                     where: Where) -> list[tuple[float, float]]:
    """(upper bound, cumulative count gained in the window), by increasing bound."""
    then = before.by_label(f"{name}_bucket", "le", where)
    now = after.by_label(f"{name}_bucket", "le", where)
    reset = any(now.get(le, 0.0) < count for le, count in then.items())
    return sorted((float(le), count - (0.0 if reset else then.get(le, 0.0)))
                  for le, count in now.items())


def quantile(before: Page, after: Page, name: str, q: float,
             where: Where = None) -> float | None:
    """The q-quantile of a histogram's observations made in the window, interpolated
    linearly inside its bucket (PromQL's histogram_quantile); None without observations."""
    buckets = _bucket_increase(before, after, name, where)
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound  # the highest finite bound, as PromQL answers
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def mean(before: Page, after: Page, name: str, where: Where = None) -> float | None:
    """The mean of a histogram's observations made in the window."""
    count = increase(before, after, f"{name}_count", where)
    total = increase(before, after, f"{name}_sum", where)
    if not count or total is None:
        return None
    return total / count
