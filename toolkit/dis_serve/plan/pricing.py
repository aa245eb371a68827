"""What a deployment costs a year, and what the plan saves against aggregated serving."""

from __future__ import annotations

from dataclasses import dataclass

HOURS_PER_YEAR = 24 * 365


def yearly_cost(gpus: float, price_per_gpu_hour: float) -> float:
    return gpus * price_per_gpu_hour * HOURS_PER_YEAR


@dataclass(frozen=True)
class Savings:
    """The plan against the aggregated deployment that serves the same goodput."""

    plan_gpus: int
    agg_gpus: int
    price_per_gpu_hour: float

    @property
    def gpus(self) -> int:
        return self.agg_gpus - self.plan_gpus

    @property
    def share(self) -> float:
        return self.gpus / self.agg_gpus if self.agg_gpus else 0.0

    @property
    def yearly_usd(self) -> float:
        return yearly_cost(self.gpus, self.price_per_gpu_hour)
