"""Which performance model answers a plan: AIConfigurator's measured data where it has
them, else the roofline (kept apart from `perf_model` so the base module imports neither)."""

from __future__ import annotations

from .aiconfigurator_model import AiconfiguratorModel, AiconfiguratorUnavailable
from .perf_model import ModelOnGpu, PerfModel, PerfSource
from .roofline_model import RooflineModel


def choose_perf_model(target: ModelOnGpu, prefer: PerfSource | None = None,
                      reason: str | None = None) -> PerfModel:
    """AIConfigurator's measured data wherever it answers, else the roofline, which records
    why it was used (`fallback_reason`)."""
    reason = reason or "roofline requested"
    if prefer is not PerfSource.ROOFLINE:
        try:
            return AiconfiguratorModel(target)
        except (AiconfiguratorUnavailable, ImportError) as exc:  # ImportError: no `.[run]`
            reason = str(exc)
    return RooflineModel(target, reason)
