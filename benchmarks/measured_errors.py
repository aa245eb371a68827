"""The measured cases the planner weighs its verdicts with (`plan.model_error`): one CSV,
`benchmarks/published/measured_error.csv` (the package reads it as
`builtin/measured_error.csv`), that each benchmark setting plans beside published
measurements rewrites its own rows of (`--write-errors`)."""

from __future__ import annotations

import csv
from pathlib import Path

FILE = Path(__file__).resolve().parent / "published" / "measured_error.csv"
FIELDS = ("benchmark", "mode", "case", "model", "gpu", "dtype", "tp", "isl", "osl", "itl_ms",
          "arrival", "engine", "ratio", "source")


def replace_rows(benchmark: str, rows: list[dict]) -> Path:
    """Write `rows` as `benchmark`'s cases, keeping every other benchmark's."""
    kept = []
    if FILE.exists():
        with FILE.open(newline="") as old:
            kept = [r for r in csv.DictReader(old) if r["benchmark"] != benchmark]
    with FILE.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(kept + [{"benchmark": benchmark} | r for r in rows])
    return FILE
