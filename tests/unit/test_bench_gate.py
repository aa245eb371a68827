"""The CI gate: a run passes against its own results and fails against a doctored baseline,
saying which metric regressed by how much."""

from __future__ import annotations

import math

import pytest

from dis_serve.bench.gate import RegressionError, enforce, evaluate, load_baseline
from dis_serve.bench.metrics import METRICS
from dis_serve.errors import UserInputError
from fixtures.aiperf.load import smoke_result


def _doctored(result, point_index: int, **aiperf_changes):
    """The same results with one point's AIPerf figures replaced."""
    points = list(result.points)
    target = points[point_index]
    points[point_index] = target.model_copy(
        update={"aiperf": target.aiperf.model_copy(update=aiperf_changes)})
    return result.model_copy(update={"points": points})


def test_a_run_passes_against_its_own_results():
    result = smoke_result()
    verdict = evaluate(result, result, 5.0, baseline_source="b.json")
    assert verdict.passed
    assert verdict.checks
    assert all(c.regression_pct == 0 for c in verdict.checks)


def test_throughput_below_the_baseline_fails_naming_metric_and_percent():
    current = smoke_result()
    base_tp = current.points[1].aiperf.request_throughput
    baseline = _doctored(current, 1, request_throughput=base_tp * 2)
    verdict = evaluate(current, baseline, 20.0, baseline_source="b.json")
    failed = {c.metric: c for c in verdict.failures}
    assert set(failed) == {"request_throughput"}
    assert failed["request_throughput"].regression_pct == pytest.approx(50.0)
    with pytest.raises(RegressionError) as info:
        enforce(verdict, "b.json")
    message = str(info.value)
    assert "request_throughput at concurrency 4" in message
    assert "50.0% worse" in message
    assert info.value.exit_code == 1


def test_latency_above_the_baseline_fails():
    current = smoke_result()
    ttft = current.points[0].aiperf.ttft_ms
    baseline = _doctored(current, 0, ttft_ms=ttft.model_copy(update={"p50": ttft.p50 / 2}))
    verdict = evaluate(current, baseline, 20.0, baseline_source="b.json")
    assert [(c.metric, c.load) for c in verdict.failures] == [("ttft_p50_ms", "concurrency 1")]
    assert verdict.failures[0].regression_pct == pytest.approx(100.0)


def test_improvements_never_fail():
    current = smoke_result()
    ttft = current.points[0].aiperf.ttft_ms
    baseline = _doctored(current, 0, ttft_ms=ttft.model_copy(update={"p50": ttft.p50 * 3}),
                         request_throughput=current.points[0].aiperf.request_throughput / 3)
    assert evaluate(current, baseline, 1.0, baseline_source="b.json").passed


def test_errors_appearing_where_there_were_none_fail():
    baseline = smoke_result()
    current = _doctored(baseline, 1, errors=3)
    (failure,) = evaluate(current, baseline, 50.0, baseline_source="b.json").failures
    assert failure.metric == "errors"
    assert math.isinf(failure.regression_pct)
    assert "from 0" in failure.describe()


def test_p99_is_reported_but_not_gated():
    current = smoke_result()
    ttft = current.points[1].aiperf.ttft_ms
    baseline = _doctored(current, 1, ttft_ms=ttft.model_copy(update={"p99": ttft.p99 / 10}))
    assert evaluate(current, baseline, 5.0, baseline_source="b.json").passed
    assert {m.key for m in METRICS if not m.gated} == {"ttft_p99_ms", "itl_p99_ms",
                                                        "e2e_p99_ms"}


def test_baseline_of_another_scenario_is_refused():
    current = smoke_result()
    other = current.model_copy(update={"scenario": current.scenario.model_copy(
        update={"name": "chat"})})
    with pytest.raises(UserInputError, match=r"b.json: baseline is for scenario 'chat'"):
        evaluate(current, other, 5.0, baseline_source="b.json")


def test_baseline_of_another_topology_is_refused():
    current = smoke_result()
    with pytest.raises(UserInputError, match="topology 'agg-mocker'"):
        evaluate(current, current.model_copy(update={"topology": "agg-mocker"}), 5.0,
                 baseline_source="b.json")


def test_missing_baseline_file_is_bad_input(tmp_path):
    with pytest.raises(UserInputError, match=r"baseline file not found.*--write-baseline"):
        load_baseline(tmp_path / "nope.json")


def test_baseline_round_trips_through_its_file(tmp_path):
    result = smoke_result()
    path = tmp_path / "baseline.json"
    path.write_text(result.model_dump_json())
    assert load_baseline(path) == result


def test_not_a_results_file_is_bad_input(tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text('{"hello": 1}')
    with pytest.raises(UserInputError, match="not a dis-serve results file"):
        load_baseline(path)
