"""`diff` (what differs between two runs) and `top` (a live per-pool view of a running graph)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

console = Console(highlight=False, soft_wrap=True)


def _value(value: object) -> str:
    return "(absent)" if value is None else str(value)


def diff(
    run_a: Annotated[Path, typer.Argument(
        help="An output directory of bench, compare, chaos or plan (holds fingerprint.json).")],
    run_b: Annotated[Path, typer.Argument(help="The directory to compare it with.")],
) -> None:
    """Say what differs between two runs (configuration, versions, hardware, environment) and
    put their results side by side with the change."""
    from rich.table import Table

    from ..evidence.diff import Category, diff_fingerprints, diff_results, load_run

    a, b = load_run(run_a), load_run(run_b)
    console.print(f"A: {run_a} ({a.command}, {a.created_at})", markup=False)
    console.print(f"B: {run_b} ({b.command}, {b.created_at})", markup=False)
    differences = diff_fingerprints(a, b)
    for category in Category:
        found = [d for d in differences if d.category is category]
        console.print(f"{category.value}: " + (f"{len(found)} differ" if found else "same"),
                      markup=False)
        for d in found:
            console.print(f"  {d.key}: {_value(d.a)} -> {_value(d.b)}", markup=False)
    rows = diff_results(run_a, run_b)
    if not rows:
        return
    table = Table(title="results", title_justify="left")
    for column in ("load", "metric", "A", "B", "change"):
        table.add_column(column, justify="right" if column in ("A", "B", "change") else "left")
    for row in rows:
        change = row.change_pct
        table.add_row(row.load, f"{row.metric} ({row.unit})",
                      "n/a" if row.a is None else f"{row.a:.4g}",
                      "n/a" if row.b is None else f"{row.b:.4g}",
                      "n/a" if change is None else f"{change:+.1f}%")
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(diff)
