"""One sweep point seen request by request: AIPerf's per-request export read back.

AIPerf writes one JSON line per request (`profile_export.jsonl`, export level `records`).
From it come what the summary cannot give: goodput by input-length bucket (does
disaggregation pay for long prompts and not for short ones?), the latency CDFs of the plots,
and, for a trace replay, how late each request left against the trace's own timestamp.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import RunError

RECORDS_FILE = "profile_export.jsonl"


@dataclass(frozen=True)
class RequestRecord:
    input_tokens: int
    ttft_ms: float | None
    itl_ms: float | None
    good: bool
    start_ns: int
    failed: bool
    # What `dis-serve chaos` compares request by request and places in time.
    session: int = 0
    end_ns: int = 0
    error: str | None = None  # AIPerf's error type, when it failed
    output_tokens: int | None = None


def read_records(path: Path) -> list[RequestRecord]:
    """The profiling phase's requests (warm-up excluded), in the order AIPerf sent them."""
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RunError(f"{path}: cannot read AIPerf's per-request export ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            meta, metrics = entry["metadata"], entry.get("metrics") or {}
        except (ValueError, KeyError, TypeError):
            raise RunError(f"{path}:{number}: not an AIPerf 0.13 request record") from None
        if meta.get("benchmark_phase") != "profiling":
            continue
        records.append(RequestRecord(
            input_tokens=int(_value(metrics, "input_sequence_length") or 0),
            ttft_ms=_value(metrics, "time_to_first_token"),
            itl_ms=_value(metrics, "inter_token_latency"),
            good=bool(_value(metrics, "good_request_count")),
            start_ns=int(meta.get("request_start_ns") or meta.get("credit_issued_ns") or 0),
            failed=entry.get("error") is not None,
            session=int(meta.get("session_num") or 0),
            end_ns=int(meta.get("request_end_ns") or 0),
            error=_error_type(entry.get("error")),
            output_tokens=_tokens(metrics)))
    return sorted(records, key=lambda r: r.start_ns)


def _error_type(error: object) -> str | None:
    if error is None:
        return None
    kind = error.get("type") if isinstance(error, dict) else None
    return str(kind) if kind else "error"


def _tokens(metrics: dict) -> int | None:
    tokens = _value(metrics, "output_sequence_length")
    return None if tokens is None else int(tokens)


def _value(metrics: dict, tag: str) -> float | None:
    metric = metrics.get(tag)
    if not isinstance(metric, dict):
        return None
    value = metric.get("value")
    return float(value) if isinstance(value, int | float) else None


class BucketGoodput(BaseModel):
    """The requests of one input-length bucket at one point."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    low: int = Field(description="Smallest input length in the bucket (tokens).")
    high: int | None = Field(description="First input length past the bucket; None: open.")
    requests: int
    good_requests: int = Field(description="Requests that met the SLA.")
    goodput_per_gpu: float = Field(
        description="Good requests per second per GPU over the point's measurement.")

    @property
    def label(self) -> str:
        return f">={self.low}" if self.high is None else f"{self.low}-{self.high - 1}"


def bucket_goodput(records: list[RequestRecord], edges: list[int], *, duration_s: float,
                   gpus: int) -> list[BucketGoodput]:
    """Goodput per GPU by input length; empty buckets are left out."""
    bounds = [0, *edges]
    buckets = []
    for index, low in enumerate(bounds):
        high = bounds[index + 1] if index + 1 < len(bounds) else None
        inside = [r for r in records
                  if r.input_tokens >= low and (high is None or r.input_tokens < high)]
        if not inside:
            continue
        good = sum(1 for r in inside if r.good and not r.failed)
        buckets.append(BucketGoodput(
            low=low, high=high, requests=len(inside), good_requests=good,
            goodput_per_gpu=good / duration_s / gpus if duration_s > 0 else 0.0))
    return buckets


class ScheduleLag(BaseModel):
    """How late requests left against the trace's timestamps (replay fidelity)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    requests: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def trace_offsets_ms(trace_file: Path, speedup: float) -> list[float]:
    """Each row's send time from the trace's first row, scaled by the speed-up, sorted."""
    stamps = []
    for line in trace_file.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            if row.get("timestamp") is not None:
                stamps.append(float(row["timestamp"]))
    stamps.sort()
    return [(t - stamps[0]) / speedup for t in stamps] if stamps else []


def schedule_lag(records: list[RequestRecord], planned_ms: list[float]) -> ScheduleLag | None:
    """Sent-vs-planned lag, matching the n-th request sent with the n-th trace row.

    Both clocks start at their first request, so a constant start-up delay does not count;
    what is left is how far the replay drifted from the trace's spacing.
    """
    sent = [r.start_ns for r in records if r.start_ns]
    if not sent or len(sent) != len(planned_ms):
        return None
    import numpy

    lags = numpy.array([(ns - sent[0]) / 1e6 - plan
                        for ns, plan in zip(sent, planned_ms, strict=True)])
    return ScheduleLag(requests=len(lags), p50_ms=float(numpy.percentile(lags, 50)),
                       p99_ms=float(numpy.percentile(lags, 99)), max_ms=float(lags.max()))
