"""AIPerf's summary export (`profile_export_aiperf.json`) read into a frozen, typed model.

Only the figures dis-serve reports are read; each is checked for the unit AIPerf 0.13.0
writes, so a format change shows up as one clear error rather than as wrong numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..errors import RunError


class Percentiles(BaseModel):
    """A latency distribution over the requests of one point, in milliseconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    avg: float
    p50: float
    p90: float
    p99: float


class AiperfSummary(BaseModel):
    """What AIPerf measured at one sweep point (profiling phase only; warm-up excluded)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    aiperf_version: str
    ttft_ms: Percentiles | None = Field(description="Time to first token (streaming only).")
    itl_ms: Percentiles | None = Field(description="Inter-token latency (streaming only).")
    e2e_ms: Percentiles = Field(description="End-to-end request latency.")
    request_throughput: float = Field(description="Successful requests per second.")
    output_token_throughput: float = Field(description="Output tokens per second, all users.")
    output_token_throughput_per_user: float | None = Field(
        description="Mean output tokens per second each request saw while decoding.")
    goodput: float | None = Field(
        description="Requests per second that met the SLA (streaming runs only).")
    good_requests: int | None = Field(description="Requests that met the SLA.")
    completed_requests: int = Field(description="Requests that finished without error.")
    errors: int = Field(description="Requests that failed (HTTP error, timeout, cancelled).")
    error_kinds: dict[str, int] = Field(
        default_factory=dict, description="Error type -> count, as AIPerf reported them.")
    input_tokens_mean: float
    output_tokens_mean: float
    output_tokens_min: float | None = Field(
        default=None, description="Shortest completion of the point, in tokens.")
    duration_s: float = Field(description="AIPerf's benchmark duration for the profiling phase.")
    was_cancelled: bool
    prefix_cache_hit_pct: float | None = Field(
        default=None,
        description="Prompt tokens the workers served from their prefix cache, in % of all "
                    "prompt tokens: each worker reports its cached tokens in the response's "
                    "usage (prompt_tokens_details.cached_tokens) and AIPerf totals them.")


def read_export(path: Path) -> AiperfSummary:
    """Read an AIPerf summary export; RunError naming the file if it is missing or unexpected."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunError(f"{path}: AIPerf wrote no summary export") from None
    except (OSError, ValueError) as exc:
        raise RunError(f"{path}: not a readable AIPerf export ({exc})") from None
    if not isinstance(data, dict):
        raise RunError(f"{path}: not an AIPerf summary export (expected a JSON object)")
    return parse_export(data, str(path))


def parse_export(data: dict[str, Any], source: str) -> AiperfSummary:
    reader = _Reader(data, source)
    return AiperfSummary(
        aiperf_version=str(data.get("aiperf_version", "unknown")),
        ttft_ms=reader.percentiles("time_to_first_token", "ms", required=False),
        itl_ms=reader.percentiles("inter_token_latency", "ms", required=False),
        e2e_ms=reader.percentiles("request_latency", "ms"),
        request_throughput=reader.value("request_throughput", "requests/sec"),
        output_token_throughput=reader.value("output_token_throughput", "tokens/sec"),
        output_token_throughput_per_user=reader.value(
            "output_token_throughput_per_user", "tokens/sec/user", required=False),
        # Present (0 when no request met the SLA) whenever AIPerf was given one.
        goodput=reader.value("goodput", "requests/sec", required=False),
        good_requests=_int(reader.value("good_request_count", "requests", required=False)),
        completed_requests=int(reader.value("request_count", "requests", required=False) or 0),
        errors=int(reader.value("error_request_count", "requests", required=False) or 0),
        error_kinds=_error_kinds(data.get("error_summary")),
        input_tokens_mean=reader.value("input_sequence_length", "tokens", required=False) or 0.0,
        output_tokens_mean=reader.value("output_sequence_length", "tokens", required=False) or 0.0,
        output_tokens_min=reader.stat("output_sequence_length", "tokens", "min"),
        duration_s=reader.value("benchmark_duration", "sec"),
        was_cancelled=bool(data.get("was_cancelled", False)),
        prefix_cache_hit_pct=reader.value("overall_usage_prompt_cache_read_pct", "%",
                                          required=False),
    )


class _Reader:
    def __init__(self, data: dict[str, Any], source: str) -> None:
        self.data = data
        self.source = source

    def _metric(self, tag: str, unit: str, required: bool) -> dict[str, Any] | None:
        metric = self.data.get(tag)
        if metric is None:
            if required:
                raise RunError(f"{self.source}: AIPerf export has no '{tag}'")
            return None
        if not isinstance(metric, dict) or metric.get("unit") != unit:
            got = metric.get("unit") if isinstance(metric, dict) else type(metric).__name__
            raise RunError(f"{self.source}: AIPerf export '{tag}' is in {got!r}, expected "
                           f"{unit!r} (an AIPerf version other than 0.13?)")
        return metric

    def value(self, tag: str, unit: str, required: bool = True) -> float | None:
        metric = self._metric(tag, unit, required)
        if metric is None:
            return None
        return _number(metric, "avg", tag, self.source)

    def stat(self, tag: str, unit: str, stat: str) -> float | None:
        metric = self._metric(tag, unit, required=False)
        if metric is None or stat not in metric:
            return None
        return _number(metric, stat, tag, self.source)

    def percentiles(self, tag: str, unit: str, required: bool = True) -> Percentiles | None:
        metric = self._metric(tag, unit, required)
        if metric is None:
            return None
        return Percentiles(**{k: _number(metric, k, tag, self.source)
                              for k in ("avg", "p50", "p90", "p99")})


def _number(metric: dict[str, Any], key: str, tag: str, source: str) -> float:
    value = metric.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RunError(f"{source}: AIPerf export '{tag}.{key}' is {value!r}, expected a number")
    return float(value)


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _error_kinds(summary: Any) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for entry in summary or []:
        details = entry.get("error_details") or {}
        kind = str(details.get("type") or details.get("code") or "error")
        kinds[kind] = kinds.get(kind, 0) + int(entry.get("count", 0))
    return kinds
