"""Queueing formulas the planner's predictions rest on."""

from __future__ import annotations

import math

import pytest

from dis_serve.plan import queueing
from dis_serve.plan.queueing import erlang_c, pool_wait


def test_one_server_waits_with_probability_equal_to_its_utilization():
    # M/M/1: an arrival finds the server busy with probability rho.
    assert erlang_c(1, 0.7) == pytest.approx(0.7)


def test_two_servers_match_the_closed_form():
    # M/M/2: C = 2 rho^2 / (1 + rho) for per-server utilization rho.
    rho = 0.6
    assert erlang_c(2, 2 * rho) == pytest.approx(2 * rho**2 / (1 + rho))


def test_many_server_limit_stays_close_to_the_exact_recursion(monkeypatch):
    approx = erlang_c(400, 380.0)
    monkeypatch.setattr(queueing, "EXACT_SERVERS_LIMIT", 10**6)
    exact = erlang_c(400, 380.0)
    assert approx == pytest.approx(exact, rel=0.05)


def test_a_saturated_pool_is_unstable():
    wait = pool_wait(servers=4, service_ms=1000.0, rate_per_s=4.0)
    assert not wait.stable
    assert math.isinf(wait.mean_ms)


def test_deterministic_service_halves_the_exponential_wait():
    deterministic = pool_wait(servers=3, service_ms=200.0, rate_per_s=12.0)
    exponential = pool_wait(servers=3, service_ms=200.0, rate_per_s=12.0, service_scv=1.0)
    assert deterministic.mean_ms == pytest.approx(exponential.mean_ms / 2)


def test_wait_grows_with_load():
    waits = [pool_wait(servers=8, service_ms=400.0, rate_per_s=r).mean_ms
             for r in (5.0, 10.0, 15.0, 19.0)]
    assert waits == sorted(waits)
    assert waits[0] < waits[-1]


def test_the_90th_percentile_is_zero_when_few_requests_wait():
    wait = pool_wait(servers=16, service_ms=100.0, rate_per_s=20.0)
    assert wait.delayed < 0.1
    assert wait.p90_ms == 0.0
