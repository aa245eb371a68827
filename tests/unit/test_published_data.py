"""The published figures the planner is checked against and weighs its verdicts with load,
and each names where it came from."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

PUBLISHED = Path(__file__).resolve().parents[2] / "benchmarks" / "published"


def _rows(name: str) -> list[dict]:
    with (PUBLISHED / name).open(newline="") as data:
        return list(csv.DictReader(data))


@pytest.mark.parametrize("name", ["mlperf_llama2_70b_offline.csv", "mlperf_llama2_70b_sla.csv"])
def test_every_mlperf_figure_names_the_log_it_was_read_from(name):
    rows = _rows(name)
    assert rows
    for row in rows:
        assert row["source_repo"] and len(row["source_commit"]) == 40
        if row["tokens_per_s"]:
            assert row["source_path"].endswith("mlperf_log_summary.txt"), row
            assert row["settings_source"] and float(row["tokens_per_s"]) > 0
        else:  # what could not be found says so, instead of a figure
            assert row["planned"].startswith("not published: "), row


def test_mlperf_server_and_interactive_rows_hold_the_p99_limits_each_scenario_states():
    limits = {(r["scenario"], r["ttft_p99_limit_ms"], r["tpot_p99_limit_ms"])
              for r in _rows("mlperf_llama2_70b_sla.csv") if r["tokens_per_s"]}
    assert limits == {("Server", "2000", "200"), ("Interactive", "450", "40")}


def test_every_published_table_case_names_its_document_and_commit():
    for row in _rows("trtllm_perf_overview.csv"):
        assert row["document"] and len(row["commit"]) == 40 and row["version"], row


def test_every_published_comparison_names_its_source_and_says_what_was_planned():
    rows = _rows("agg_vs_disagg_verdicts.csv")
    assert len({r["id"] for r in rows}) == len(rows)
    for row in rows:
        assert row["source"] and row["engine"] and row["kind"], row
        assert row["published_verdict"] in ("agg", "disagg", "depends"), row
        assert row["plan_model"] or row["plan_note"].startswith("not planned: "), row


def test_every_measured_case_the_planner_reads_names_its_source():
    from dis_serve.plan.model_error import MEASURED_ERROR_FILE, builtin_cases

    rows = _rows("measured_error.csv")
    assert MEASURED_ERROR_FILE.resolve() == (PUBLISHED / "measured_error.csv").resolve()
    assert len(builtin_cases()) == len(rows)
    assert all(r["source"] and r["benchmark"] for r in rows)
