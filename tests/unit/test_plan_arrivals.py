"""Offline (closed-loop) workloads beside Poisson arrivals, and a verification that holds a
replay to the planned rate as well as to the SLA."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import assert_one_line_error
from dis_serve.plan.mocker_profile import profile_tables, write_profile
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.replay import replay_plan
from dis_serve.plan.request import Arrival, build_request
from dis_serve.plan.verify import replay_failure

# Published throughput tables' conditions: a loose SLA that does not bind, a long output.
LOOSE = {"model": "llama-3.1-70b", "isl": 128, "osl": 2048, "budget": 2, "ttft_ms": 60000.0,
         "itl_ms": 1000.0, "dtype": "fp8", "kv_cache_dtype": "fp8", "replay": False}


@pytest.fixture(scope="module")
def plans():
    return {arrival: make_plan(build_request(**LOOSE, arrival=arrival)) for arrival in Arrival}


def test_offline_runs_the_batch_at_its_cap_where_poisson_keeps_room_for_bursts(plans):
    offline = plans[Arrival.OFFLINE].chosen.prediction
    poisson = plans[Arrival.POISSON].chosen.prediction
    assert offline.slot_utilization == pytest.approx(1.0, abs=0.01)
    assert poisson.slot_utilization < 0.95
    assert plans[Arrival.OFFLINE].chosen.rate > plans[Arrival.POISSON].chosen.rate


def test_a_closed_loop_has_no_arrival_spread_in_its_percentiles(plans):
    offline = plans[Arrival.OFFLINE].chosen.prediction
    assert offline.itl_p90_ms == offline.itl_ms
    assert offline.queue_wait_ms == 0.0


def test_a_trace_brings_its_own_arrivals(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n')
    with pytest.raises(Exception, match="`trace` sets the arrivals"):
        build_request(model="llama-3.1-8b", trace=trace, ttft_ms=500.0, itl_ms=50.0,
                      budget=8, arrival="offline")


def _replayed(plan, tmp_path, **candidate_changes):
    cand = plan.chosen
    if candidate_changes:
        cand = dataclasses.replace(cand, prediction=dataclasses.replace(
            cand.prediction, **candidate_changes))
    profile = write_profile(profile_tables(plan.model, cand, plan.workload.isl,
                                           plan.space.seq_len), tmp_path / "profile.npz")
    request = plan.request
    return cand, replay_plan(request.target(), cand, profile, plan.workload,
                             ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                             gpus_per_node=request.gpus_per_node)


def test_a_closed_loop_replay_delivers_the_offline_plan_and_passes(plans, tmp_path):
    plan = plans[Arrival.OFFLINE]
    cand, replayed = _replayed(plan, tmp_path)
    assert replayed.steady
    assert replayed.served_rate == pytest.approx(cand.rate, rel=0.02)
    assert replay_failure(cand, replayed, plan.workload) is None


def test_a_replay_short_of_the_planned_rate_fails_at_a_loose_sla(plans, tmp_path):
    """The same deployment promised 7% more than it has: the closed loop keeps that many
    more requests in flight, the slots are full, the replay serves what the deployment can,
    and the SLA (60 s, 1 s) still holds for the nine in ten it promises (the queued few wait
    a whole 2048-token generation for a slot)."""
    plan = plans[Arrival.OFFLINE]
    promised = plan.chosen.rate * 1.07
    cand, replayed = _replayed(plan, tmp_path, rate_per_s=promised)
    assert replayed.sla_met_share >= 0.9
    failure = replay_failure(cand, replayed, plan.workload)
    assert failure is not None and "short of the planned" in failure


def test_emit_refuses_a_plan_whose_replay_never_reached_a_steady_state(run_cli, tmp_path):
    """60 requests cannot span the warm-up and window a steady state needs: a real replay,
    too short, under a loose SLA that every request meets."""
    result = run_cli("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "256",
                     "--budget", "2", "--ttft-ms", "60000", "--itl-ms", "1000",
                     "--replay-requests", "60", "--out", tmp_path, "--emit",
                     tmp_path / "emitted.yaml")
    assert_one_line_error(result, "--emit refused", "never reached a steady state", code=1)
    assert not (tmp_path / "emitted.yaml").exists()


def test_a_closed_loop_replay_sees_the_ttft_the_plan_predicts(plans, tmp_path):
    """At steady state a request's first token waits for the step it lands in and its own
    prompt steps only, not the 2-4x factor AIConfigurator gives a batch whose requests all
    arrive at once."""
    plan = plans[Arrival.OFFLINE]
    cand, replayed = _replayed(plan, tmp_path)
    assert replayed.ttft_mean_ms == pytest.approx(cand.prediction.ttft_mean_ms, rel=0.15)


def test_poisson_prompts_wait_longer_for_the_prompt_budget_as_the_rate_grows(plans):
    from dis_serve.plan.search import at_rate

    plan = plans[Arrival.POISSON]
    lighter = at_rate(plan.space, plan.chosen, plan.chosen.rate / 2)
    assert lighter is not None
    assert 0 < lighter.prediction.queue_wait_ms < plan.chosen.prediction.queue_wait_ms
    assert lighter.prediction.ttft_p90_ms < plan.chosen.prediction.ttft_p90_ms
