"""`compare` arms side by side: per-metric spread over repetitions, change against the first
arm, whether it clears the spread, the goodput verdict, and the report with its plots."""

from __future__ import annotations

import json

from dis_serve.bench.ab import ArmRuns, bucket_verdicts, compare_rows, spread
from dis_serve.bench.ab_report import verdict_line, write_compare_report
from dis_serve.bench.metrics import BenchResult
from fixtures.aiperf.load import smoke_result

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _arm(label: str, runs: list[BenchResult]) -> ArmRuns:
    return ArmRuns(label=label, slug=label, topology_file=f"{label}.yaml", gpus=runs[0].gpus,
                   runs=runs, run_dirs=[f"/nonexistent/{label}/{i}" for i in range(len(runs))])


def _row(rows, load: str, metric: str):
    return next(r for r in rows if r.load == load and r.metric == metric)


def test_rows_pair_points_by_load_and_give_the_change_against_the_first_arm():
    disagg, agg = smoke_result("disagg"), smoke_result("agg")
    rows = compare_rows([_arm("disagg", [disagg]), _arm("agg", [agg])])
    base, other = _row(rows, "4", "request_throughput").cells
    assert base.value.mean == disagg.points[1].aiperf.request_throughput
    assert other.value.mean == agg.points[0].aiperf.request_throughput
    assert other.change_pct == 100.0 * (other.value.mean - base.value.mean) / base.value.mean
    assert _row(rows, "1", "request_throughput").cells[1].value is None


def test_one_run_per_arm_has_no_spread_to_judge_by():
    rows = compare_rows([_arm("disagg", [smoke_result("disagg")]),
                         _arm("agg", [smoke_result("agg")])])
    assert _row(rows, "4", "request_throughput").cells[1].beyond_spread is None


def test_repetitions_give_a_range_and_a_difference_outside_it_counts():
    disagg, agg = smoke_result("disagg"), smoke_result("agg")
    rows = compare_rows([_arm("disagg", [disagg, disagg]), _arm("agg", [agg, agg])])
    base, other = _row(rows, "4", "ttft_p50_ms").cells
    assert base.value.runs == 2 and base.value.low == base.value.high
    assert other.beyond_spread is (other.value.mean != base.value.mean)
    mixed = compare_rows([_arm("disagg", [disagg, disagg]), _arm("both", [disagg, agg])])
    assert _row(mixed, "4", "ttft_p50_ms").cells[1].beyond_spread is False


def test_verdict_names_the_arm_with_more_goodput_per_gpu():
    disagg, agg = smoke_result("disagg"), smoke_result("agg")
    verdicts = bucket_verdicts([_arm("disagg", [disagg, disagg]), _arm("agg", [agg, agg])])
    overall = next(v for v in verdicts if v.load == "4" and v.bucket == "all")
    d, a = (c.value.mean for c in overall.row.cells)
    assert overall.winner == ("disagg" if d > a else "agg")
    assert overall.decided is (d != a)


def test_report_writes_markdown_csv_json_and_every_plot(tmp_path):
    arms = [_arm("disagg", [smoke_result("disagg")]), _arm("agg", [smoke_result("agg")])]
    files = write_compare_report(arms, tmp_path)
    text = files.markdown.read_text()
    assert "# Compare: `disagg` vs `agg`, scenario `smoke`" in text
    assert "| 4 | Requests/s (req/s) |" in text
    assert "## Goodput per GPU under the SLA, by input length" in text
    rows = files.csv.read_text().splitlines()
    assert len(rows) == 1 + len(compare_rows(arms)) * len(arms)
    assert ArmRuns.model_validate(json.loads(files.json.read_text())[0]) == arms[0]
    assert len(files.plots) == 4
    for png in files.plots:
        assert png.read_bytes().startswith(PNG_MAGIC), png


def test_arms_less_than_one_good_request_apart_are_a_tie():
    disagg = smoke_result("disagg")
    verdicts = bucket_verdicts([_arm("first", [disagg, disagg]),
                                _arm("second", [disagg, disagg])])
    assert verdicts and all(v.tie for v in verdicts)
    assert all("tie" in verdict_line(v) for v in verdicts)


def test_the_mean_of_equal_runs_stays_inside_their_range():
    # fmean([0.1] * 3) rounds above 0.1: a mean outside [low, high] gave negative error bars.
    value = spread([0.1, 0.1, 0.1])
    assert value.low <= value.mean <= value.high
