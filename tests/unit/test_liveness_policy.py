"""When a running process is not doing its job (hung, or forgotten by etcd): decisions on
a fake clock (the caller's monotonic seconds)."""

from __future__ import annotations

from dis_serve.launch.liveness_policy import (
    RegistrationWatch,
    unanswered_before_restart,
)
from dis_serve.topology import Liveness, ProcessKind

LIVENESS = Liveness(failures=3)


def test_a_hung_worker_is_restarted_after_liveness_failures_misses():
    assert unanswered_before_restart(ProcessKind.WORKER, LIVENESS) == 3


def test_hung_etcd_and_nats_are_restarted_after_twice_as_many_misses():
    assert unanswered_before_restart(ProcessKind.ETCD, LIVENESS) == 6
    assert unanswered_before_restart(ProcessKind.NATS, LIVENESS) == 6


def test_a_slow_frontend_is_never_restarted_as_hung():
    assert unanswered_before_restart(ProcessKind.FRONTEND, LIVENESS) is None


def test_workers_the_router_lost_are_restarted_once_the_grace_has_passed():
    watch = RegistrationWatch(grace_s=3.0)
    ready = {"prefill": 1, "decode": 2}
    assert watch.observe(0.0, {"prefill": 1, "decode": 0}, ready) == []
    assert watch.observe(2.9, {"prefill": 1, "decode": 0}, ready) == []
    assert watch.observe(3.0, {"prefill": 1, "decode": 0}, ready) == ["decode"]


def test_a_shortfall_shorter_than_the_grace_restarts_nothing():
    watch = RegistrationWatch(grace_s=3.0)
    ready = {"decode": 2}
    assert watch.observe(0.0, {"decode": 1}, ready) == []
    assert watch.observe(2.0, {"decode": 2}, ready) == []
    assert watch.observe(4.0, {"decode": 1}, ready) == []  # a new shortfall, a new grace
    assert watch.observe(7.0, {"decode": 1}, ready) == ["decode"]


def test_each_shortfall_is_reported_once():
    watch = RegistrationWatch(grace_s=1.0)
    watch.observe(0.0, {}, {"decode": 1})
    assert watch.observe(1.0, {}, {"decode": 1}) == ["decode"]
    assert watch.observe(1.5, {}, {"decode": 1}) == []


def test_a_router_that_sees_every_ready_worker_is_no_shortfall():
    watch = RegistrationWatch(grace_s=0.0)
    assert watch.observe(0.0, {"prefill": 1, "decode": 3}, {"prefill": 1, "decode": 2}) == []


def test_once_one_type_is_short_past_the_grace_every_short_type_is_restarted():
    watch = RegistrationWatch(grace_s=3.0)
    ready = {"prefill": 1, "decode": 2}
    watch.observe(0.0, {"prefill": 1, "decode": 0}, ready)
    watch.observe(1.0, {"prefill": 0, "decode": 0}, ready)  # its lease ran out later
    assert watch.observe(3.0, {"prefill": 0, "decode": 0}, ready) == ["prefill", "decode"]
