"""A plan's verdict carries its margin beside the model's measured error, and says when the
data cannot call it."""

from __future__ import annotations

import math

import pytest

from dis_serve.bench.scenario import LoadKind
from dis_serve.plan.model_error import MeasuredCase, Point, distance, mode_error, slope
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.request import build_request
from dis_serve.plan.verdict import point_of, sentence, settling_scenario, uncertainty
from dis_serve.topology import Mode


def _point(mode: Mode = Mode.AGG, **changes) -> Point:
    values = {"mode": mode, "model": "llama-3.1-70b", "gpu": "h100-sxm", "dtype": "fp8",
              "tp": 2, "isl": 1000.0, "osl": 1000.0, "itl_ms": 30.0, "arrival": "offline"}
    return Point(**(values | changes))


def _case(ratio: float, mode: Mode = Mode.AGG, **changes) -> MeasuredCase:
    return MeasuredCase(_point(mode, **changes), ratio, "a measurement")


@pytest.fixture(scope="module")
def planned():
    request = build_request(model="llama-3.1-8b", isl=1000, osl=200, budget=8,
                            ttft_ms=300.0, itl_ms=20.0)
    return make_plan(request)


def test_a_distance_counts_factors_e_and_mismatches():
    assert distance(_point(), _point()) == 0
    assert distance(_point(), _point(isl=1000 * math.e)) == pytest.approx(1.0)
    assert distance(_point(), _point(arrival="poisson", engine="vllm")) == 2.0


def test_a_plan_on_a_measured_case_carries_that_cases_error():
    cases = [_case(1.04), _case(1.30, isl=20000.0)]
    found = mode_error(_point(), cases, per_unit=0.05)
    assert found.distance == 0
    assert found.nearest[0].ratio == 1.04
    assert found.error == pytest.approx(math.sqrt((0.04**2 + 0.30**2) / 2))


def test_the_error_grows_with_the_distance_to_the_nearest_measured_case():
    cases = [_case(1.05)]
    near = mode_error(_point(isl=2000.0), cases, per_unit=0.1)
    far = mode_error(_point(isl=16000.0), cases, per_unit=0.1)
    assert near.error < far.error
    assert far.error == pytest.approx(0.05 + 0.1 * math.log(16))


def test_a_mode_never_measured_has_no_error():
    assert mode_error(_point(Mode.DISAGG), [_case(1.05)], per_unit=0.1) is None


def test_the_slope_is_the_median_change_of_error_per_unit_of_distance():
    cases = [_case(1.00), _case(1.10, isl=1000 * math.e), _case(1.10, osl=1000 * math.e)]
    assert slope(cases) == pytest.approx(0.1)


def test_a_margin_inside_the_error_is_too_close_to_call(planned):
    cases = [MeasuredCase(point_of(planned, c), 1.5, "far off")
             for c in (planned.best_agg, planned.best_disagg)]
    found = uncertainty(planned, cases)
    ratio = (planned.best_disagg.tokens_per_s_per_gpu
             / planned.best_agg.tokens_per_s_per_gpu)
    assert found.margin == pytest.approx(ratio - 1)
    assert found.model_error == pytest.approx(ratio * math.hypot(0.5, 0.5))
    assert found.too_close_to_call
    text = sentence(found, "dis-serve compare A B --scenario S --repeat 3")
    assert text.startswith("Too close to call from data; measure it")
    assert text.endswith("Settle it on your GPUs: dis-serve compare A B --scenario S --repeat 3")


def test_a_margin_outside_the_error_is_called(planned):
    cases = [MeasuredCase(point_of(planned, c), 1.0, "exact")
             for c in (planned.best_agg, planned.best_disagg)]
    found = uncertainty(planned, cases)
    assert found.model_error == 0
    assert not found.too_close_to_call
    assert sentence(found, None).startswith(f"The margin {found.margin:+.0%}")


def test_a_mode_without_measurements_leaves_the_verdict_to_be_measured(planned):
    found = uncertainty(planned, [MeasuredCase(point_of(planned, planned.best_agg), 1.0, "x")])
    assert found.model_error is None and found.too_close_to_call
    assert "no measured case of disagg serving" in sentence(found, None)


def test_for_a_rate_the_margin_is_the_share_of_gpus_saved():
    request = build_request(model="llama-3.1-70b", isl=3000, osl=200, rate=20.0,
                            ttft_ms=1000.0, itl_ms=50.0)
    planned = make_plan(request)
    found = uncertainty(planned, [])
    assert found.basis == "GPUs saved"
    assert found.margin == pytest.approx(1 - planned.best_disagg.gpus / planned.best_agg.gpus)


def test_the_settling_scenario_runs_the_plans_workload_at_each_modes_planned_rate(planned):
    scenario = settling_scenario(planned, "settle-it")
    assert scenario.load_kind is LoadKind.REQUEST_RATE
    assert scenario.request_rate == sorted(
        round(c.rate, 2) for c in (planned.best_agg, planned.best_disagg))
    assert (scenario.input_tokens.mean, scenario.output_tokens.mean) == (1000, 200)
    assert (scenario.sla.ttft_ms, scenario.sla.itl_ms) == (300.0, 20.0)


def test_the_built_in_measured_cases_cover_both_modes():
    from dis_serve.plan.model_error import builtin_cases

    cases = builtin_cases()
    assert {c.point.mode for c in cases} == {Mode.AGG, Mode.DISAGG}
    assert all(c.source and c.ratio > 0 for c in cases)
