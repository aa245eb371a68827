"""AIPerf's per-request export (`profile_export.jsonl`, written at `--export-level records`)
read into what the chaos analysis needs: when each request ran, whether it failed, how many
tokens it got and how fast."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunError

RECORDS_FILE = "profile_export.jsonl"


@dataclass(frozen=True)
class RequestRecord:
    session: int
    start_ns: int
    end_ns: int
    error: str | None
    output_tokens: int | None
    ttft_ms: float | None
    itl_ms: float | None


def _metric(metrics: dict, key: str) -> float | None:
    value = metrics.get(key)
    if isinstance(value, dict) and isinstance(value.get("value"), int | float):
        return float(value["value"])
    return None


def read_records(path: Path) -> list[RequestRecord]:
    """The profiling phase's requests (warm-up left out), in start order."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RunError(f"{path}: AIPerf wrote no per-request records ({exc})") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            meta = data["metadata"]
            if meta.get("benchmark_phase", "profiling") != "profiling":
                continue
            metrics = data.get("metrics") or {}
            error = data.get("error")
            tokens = _metric(metrics, "output_sequence_length")
            records.append(RequestRecord(
                session=int(meta["session_num"]), start_ns=int(meta["request_start_ns"]),
                end_ns=int(meta["request_end_ns"]),
                error=(error.get("type") or "error") if isinstance(error, dict) else None,
                output_tokens=int(tokens) if tokens is not None else None,
                ttft_ms=_metric(metrics, "time_to_first_token"),
                itl_ms=_metric(metrics, "inter_token_latency")))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise RunError(f"{path}: line {number} is not an AIPerf record ({exc!r})") from None
    return sorted(records, key=lambda r: r.start_ns)
