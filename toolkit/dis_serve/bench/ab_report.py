"""A comparison's exporters: compare.md (per-metric table with spread and the verdict by
input-length bucket), compare.csv, compare.json and the plots."""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass
from pathlib import Path

from .ab import ArmRuns, BucketVerdict, Row, Spread, bucket_verdicts, compare_rows
from .ab_plots import CDF_FILE, GOODPUT_FILE, HIT_RATE_FILE, write_ab_plots
from .metrics import METRICS_BY_KEY
from .plots import COMPARE_FILE, write_compare
from .report import markdown_table

COMPARE_MD = "compare.md"
COMPARE_CSV = "compare.csv"
COMPARE_JSON = "compare.json"


@dataclass(frozen=True)
class CompareFiles:
    markdown: Path
    csv: Path
    json: Path
    plots: list[Path]


def write_compare_report(arms: list[ArmRuns], out_dir: Path) -> CompareFiles:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, verdicts = compare_rows(arms), bucket_verdicts(arms)
    plots = [write_compare([(a.label, a.runs[0]) for a in arms], out_dir),
             *write_ab_plots(arms, out_dir)]
    json_path = out_dir / COMPARE_JSON
    json_path.write_text("[" + ",\n".join(a.model_dump_json() for a in arms) + "]\n",
                         encoding="utf-8")
    csv_path = out_dir / COMPARE_CSV
    csv_path.write_text(compare_csv(rows), encoding="utf-8")
    md_path = out_dir / COMPARE_MD
    md_path.write_text(compare_markdown(arms, rows, verdicts, out_dir), encoding="utf-8")
    return CompareFiles(markdown=md_path, csv=csv_path, json=json_path, plots=plots)


def compare_csv(rows: list[Row]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["load", "metric", "arm", "mean", "low", "high", "runs", "change_pct",
                     "beyond_spread"])
    for row in rows:
        for c in row.cells:
            v = c.value
            writer.writerow([row.load, row.metric, c.arm, *(
                ("", "", "", "") if v is None else (f"{v.mean:.6g}", f"{v.low:.6g}",
                                                    f"{v.high:.6g}", v.runs)),
                "" if c.change_pct is None else f"{c.change_pct:.3g}",
                "" if c.beyond_spread is None else str(c.beyond_spread).lower()])
    return buf.getvalue()


def spread_text(value: Spread | None) -> str:
    if value is None:
        return "n/a"
    if value.runs < 2:
        return f"{value.mean:.4g}"
    return f"{value.mean:.4g} ({value.low:.4g}-{value.high:.4g})"


def change_text(cell) -> str:
    if cell.change_pct is None:
        return "-"
    verdict = {True: "beyond spread", False: "within spread", None: "no spread"}[
        cell.beyond_spread]
    return f"{cell.change_pct:+.0f}% ({verdict})"


def verdict_line(v: BucketVerdict) -> str:
    if v.tie:
        return "tie: the arms are less than one good request apart"
    state = {True: "wins beyond the run-to-run spread", False: "leads, within the spread",
             None: "leads (one run per arm: no spread)"}[v.decided]
    return f"{v.winner} {state}"


def compare_markdown(arms: list[ArmRuns], rows: list[Row], verdicts: list[BucketVerdict],
                     out_dir: Path) -> str:
    s = arms[0].runs[0].scenario
    lines = [f"# Compare: {' vs '.join(f'`{a.label}`' for a in arms)}, scenario `{s.name}`",
             "", f"- Workload: {s.workload_label()}",
             f"- SLA: TTFT <= {s.sla.ttft_ms:g} ms, ITL <= {s.sla.itl_ms:g} ms; "
             f"{s.load_kind.label} " + ", ".join(p.display_value for p in s.points()),
             "- Arms run one after the other, each repetition on a freshly started graph; "
             "figures are the mean over repetitions with (lowest-highest) in brackets; a "
             "change is beyond spread when the arms' ranges do not overlap.",
             "- Prefix-cache hit rate: prompt tokens the workers report as served from their "
             "cache (usage.prompt_tokens_details.cached_tokens), % of all prompt tokens."]
    for arm in arms:
        caches = sorted({p.prefix_cache.value for r in arm.runs for p in r.points
                         if p.prefix_cache})
        links = ", ".join(f"[{os.path.relpath(d, out_dir)}]"
                          f"({os.path.relpath(d, out_dir)}/report.md)" for d in arm.run_dirs)
        lines.append(f"- `{arm.label}`: `{arm.topology_file}`, {arm.gpus} GPUs, "
                     f"{len(arm.runs)} run(s), prefix cache at point start: "
                     f"{'/'.join(caches) or 'unknown'}; reports: {links}")
    header = [s.load_kind.label.capitalize(), "Metric", *(a.label for a in arms),
              *(f"{a.label} vs {arms[0].label}" for a in arms[1:])]
    body = [[row.load, f"{METRICS_BY_KEY[row.metric].title} ({METRICS_BY_KEY[row.metric].unit})",
             *(spread_text(c.value) for c in row.cells),
             *(change_text(c) for c in row.cells[1:])] for row in rows]
    lines += ["", "## Metrics per arm", "", *markdown_table(header, body)]
    if verdicts:
        lines += ["", "## Goodput per GPU under the SLA, by input length", "",
                  *markdown_table([s.load_kind.label.capitalize(), "Input tokens",
                           *(a.label for a in arms), "Verdict"],
                          ([v.load, v.bucket, *(spread_text(c.value) for c in v.row.cells),
                            verdict_line(v)] for v in verdicts))]
    lines += ["", "## Plots", "", f"![Pareto per arm]({COMPARE_FILE})", "",
              f"![Latency CDFs]({CDF_FILE})", "", f"![Goodput per GPU against load]"
              f"({GOODPUT_FILE})", "", f"![Prefix-cache hit rate]({HIT_RATE_FILE})", ""]
    return "\n".join(lines)
