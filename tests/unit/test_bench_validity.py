"""The validity gate: a point that generated nothing, lost more requests than the scenario
allows, or stopped short of a fixed output length is invalid; the report marks it, `bench`
exits 1 on it and the CI gate refuses it as a baseline. Judged on real AIPerf exports."""

from __future__ import annotations

import csv
import io

import pytest

from conftest import REPO
from dis_serve.bench.aiperf_export import read_export
from dis_serve.bench.gate import load_baseline
from dis_serve.bench.metrics import point_result
from dis_serve.bench.report import report_markdown, results_csv
from dis_serve.bench.scenario import load_scenario
from dis_serve.bench.validity import (
    InvalidRunError,
    enforce_valid,
    invalid_points,
    point_problems,
)
from dis_serve.errors import UserInputError
from fixtures.aiperf.load import HERE, SMOKE, smoke_result


def _export_point(fixture: str, scenario):
    """A point built from one saved AIPerf export (no server metrics were kept for it)."""
    summary = read_export(HERE / fixture / "profile_export_aiperf.json")
    return point_result(scenario.points()[0], summary, gpus=2, server=None,
                        aiperf_wall_s=summary.duration_s, fingerprint=f"fixture-{fixture}")


def _with_aiperf(result, index: int, **changes):
    points = list(result.points)
    points[index] = points[index].model_copy(
        update={"aiperf": points[index].aiperf.model_copy(update=changes)})
    return result.model_copy(update={"points": points})


def _loose_output(scenario):
    """The scenario with a spread of output lengths: nothing fixes them any more."""
    return scenario.model_copy(update={"output_tokens": scenario.output_tokens.model_copy(
        update={"stddev": 8.0})})


def test_a_healthy_smoke_run_is_valid():
    assert invalid_points(smoke_result()) == []


def test_the_checked_in_baseline_is_valid():
    assert load_baseline(REPO / "benchmarks" / "baselines" / "smoke-demo.json").points


def test_a_point_that_generated_no_tokens_is_invalid():
    result = _with_aiperf(smoke_result(), 1, output_tokens_mean=0.0,
                          output_token_throughput=0.0, output_tokens_min=0.0)
    (bad,) = invalid_points(result)
    assert bad.load == "concurrency 4"
    assert bad.problems == ("no output tokens were generated",)


def test_errors_above_the_default_one_percent_make_a_point_invalid():
    scenario = _loose_output(load_scenario(SMOKE))
    assert scenario.max_error_pct == 1.0
    (problem,) = point_problems(scenario, _export_point("timeouts", scenario))
    assert "8 of 16 requests failed (50.0%, the scenario allows 1%)" in problem


def test_errors_within_the_scenarios_own_limit_are_allowed():
    scenario = _loose_output(load_scenario(SMOKE)).model_copy(update={"max_error_pct": 50.0})
    assert point_problems(scenario, _export_point("timeouts", scenario)) == ()


def test_outputs_shorter_than_a_fixed_length_make_a_point_invalid():
    smoke = load_scenario(SMOKE)  # fixes 32 output tokens; this export's are 16
    assert smoke.fixed_output_tokens == 32
    (problem,) = point_problems(smoke, _export_point("non-streaming", smoke))
    assert "as short as 16 tokens where the scenario fixes 32" in problem


def test_short_outputs_are_fine_where_the_scenario_lets_lengths_vary():
    smoke = load_scenario(SMOKE)
    for scenario in (_loose_output(smoke), smoke.model_copy(update={"ignore_eos": False})):
        assert scenario.fixed_output_tokens is None
        assert point_problems(scenario, _export_point("non-streaming", scenario)) == ()


def test_the_report_marks_an_invalid_point_and_the_csv_says_so():
    result = _with_aiperf(smoke_result(), 0, errors=3)
    markdown = report_markdown(result)
    assert "## INVALID points" in markdown
    assert "**concurrency 1**: 3 of 27 requests failed (11.1%" in markdown
    assert "| 1 **(invalid)** |" in markdown
    rows = list(csv.DictReader(io.StringIO(results_csv(result))))
    assert [row["valid"] for row in rows] == ["no", "yes"]


def test_the_report_of_a_valid_run_says_it_is_valid():
    assert "All 2 points are valid" in report_markdown(smoke_result())


def test_an_invalid_run_exits_1_naming_the_point_and_the_report():
    result = _with_aiperf(smoke_result(), 1, errors=24)
    with pytest.raises(InvalidRunError) as info:
        enforce_valid(result, "out/report.md")
    assert info.value.exit_code == 1
    assert "1 of 2 point(s) invalid (concurrency 4: 24 of 48 requests failed" in str(info.value)
    assert "see out/report.md" in str(info.value)


def test_the_gate_refuses_an_invalid_baseline(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text(_with_aiperf(smoke_result(), 0, errors=5).model_dump_json())
    with pytest.raises(UserInputError, match=r"baseline.json: the baseline is an invalid run "
                                             r"\(concurrency 1: 5 of 29 requests failed"):
        load_baseline(path)
