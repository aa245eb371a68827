"""A Mooncake-style trace checked line by line before AIPerf starts: a bad line is one error
naming the file, the line, the key and the value, not AIPerf failing seconds later in a
dozen lines (or replaying a 100M-token request for minutes).

Each line is a JSON object: `input_length` (tokens), optionally `output_length`,
`timestamp` (ms) and `hash_ids` (the shared KV blocks, `block_size` tokens each).
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import UserInputError
from .input_file import require_regular_file

# Bounds of what a replay can mean here: no model dis-serve serves takes a million-token
# prompt, and a trace past 64 MiB is not a benchmark anyone waits for.
MAX_TRACE_BYTES = 64 * 1024 * 1024
MAX_REQUEST_TOKENS = 1 << 20
MAX_HASH_IDS = 1 << 16
FIX = "each line is a JSON object like {\"timestamp\": 0, \"input_length\": 512, " \
      "\"output_length\": 64, \"hash_ids\": [1]}"


class TraceRow(BaseModel):
    """One request of the trace."""

    model_config = ConfigDict(extra="forbid", strict=True)
    input_length: int = Field(ge=1, le=MAX_REQUEST_TOKENS, description="Prompt tokens.")
    output_length: int | None = Field(default=None, ge=1, le=MAX_REQUEST_TOKENS,
                                      description="Completion tokens.")
    timestamp: float | int | None = Field(default=None, ge=0,
                                          description="Send time, ms from the trace's start.")
    hash_ids: list[int] | None = Field(default=None, max_length=MAX_HASH_IDS,
                                       description="Shared KV blocks of the prompt.")


def check_trace(path: Path, *, source: str | None = None,
                key: str = "trace.file") -> list[TraceRow]:
    """The trace's rows; UserInputError (one line) for a file that is not a regular file, is
    too big or empty, or has a line that is not a request. `source` and `key` say where the
    path was given (a scenario file's trace.file, plan's --trace)."""
    where = {"source": source, "key": key}
    require_regular_file(path, source=source or key, key=key if source else None,
                         fix="give a Mooncake-style JSONL trace",
                         max_bytes=MAX_TRACE_BYTES,
                         limit_fix="replay a slice of it (head -n 10000)")
    rows = []
    with path.open("rb") as file:
        for number, raw in enumerate(file, 1):
            if not raw.strip():
                continue
            rows.append(_row(path, number, raw, where))
    if not rows:
        raise UserInputError(f"{path} has no requests", **where, fix=FIX)
    return rows


def _row(path: Path, number: int, raw: bytes, where: dict) -> TraceRow:
    at = f"{path} line {number}"
    try:
        data = json.loads(raw)
    except ValueError:
        # The line itself is not shown: the file may be anything (the was /etc/shadow).
        raise UserInputError(f"{at}: not JSON ({len(raw)} bytes)", **where, fix=FIX) from None
    if not isinstance(data, dict):
        raise UserInputError(f"{at}: not a JSON object", **where, fix=FIX)
    try:
        return TraceRow.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(p) for p in error["loc"]) or "line"
        if error["type"] == "missing":
            problem = f"{key} is missing"
        elif error["type"] == "extra_forbidden":
            problem = f"{key} is not a trace field ({', '.join(TraceRow.model_fields)} are)"
        else:
            value = data.get(error["loc"][0]) if error["loc"] else data
            problem = f"{key} = {_shown(json.dumps(value))}: {error['msg']}"
        raise UserInputError(f"{at}: {problem}", **where, fix=FIX) from None


def _shown(text: str) -> str:
    """A bounded, printable excerpt of a value."""
    text = text.strip()
    short = text[:60] + ("..." if len(text) > 60 else "")
    return ascii(short)[1:-1]


def check_trace_fits(rows: list[TraceRow], path: Path, *, max_input_tokens: int,
                     max_output_tokens: int, source: str | None = None) -> None:
    """Every request fits the model the graph serves (model.max_input_tokens and
    max_output_tokens)."""
    for number, row in enumerate(rows, 1):
        if row.input_length > max_input_tokens:
            raise UserInputError(
                f"{path}: request {number} has input_length {row.input_length}, over the "
                f"model's max_input_tokens {max_input_tokens}", source=source,
                key="trace.file", fix="raise model.max_input_tokens or drop that request")
        if row.output_length is not None and row.output_length > max_output_tokens:
            raise UserInputError(
                f"{path}: request {number} has output_length {row.output_length}, over the "
                f"model's max_output_tokens {max_output_tokens}", source=source,
                key="trace.file", fix="raise model.max_output_tokens or drop that request")
