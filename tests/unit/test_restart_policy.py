"""The restart policy as a state machine: exits and readiness in, decisions out, on a fake
clock (the caller's monotonic seconds)."""

from __future__ import annotations

from dis_serve.launch.restart_policy import GiveUp, RestartAfter, RestartTracker
from dis_serve.topology import Restart, Supervision

POLICY = Restart(backoff_base_s=1.0, backoff_cap_s=4.0, max_failures=3, window_s=60,
                 retry_given_up_s=30)


def _crash_loop(tracker: RestartTracker, start: float, times: int) -> list:
    """`times` exits, each the instant its restart is due."""
    now, decisions = start, []
    for _ in range(times):
        decision = tracker.exited(now, "exited with status 1")
        decisions.append(decision)
        if isinstance(decision, RestartAfter):
            now = decision.at
            assert tracker.due(now) and not tracker.due(now - 0.01)
            tracker.restarting()
    return decisions


def test_backoff_doubles_for_each_exit_in_a_row_up_to_the_cap():
    tracker = RestartTracker(Restart(backoff_base_s=1.0, backoff_cap_s=4.0, max_failures=10))
    delays = [d.delay_s for d in _crash_loop(tracker, 0.0, 5)]
    assert delays == [1.0, 2.0, 4.0, 4.0, 4.0]


def test_being_ready_again_starts_the_doubling_over():
    tracker = RestartTracker(Restart(backoff_base_s=1.0, max_failures=10))
    _crash_loop(tracker, 0.0, 3)
    tracker.ready()
    assert tracker.exited(100.0, "exited with status 1") == RestartAfter(delay_s=1.0, at=101.0)


def test_max_failures_within_the_window_give_it_up_and_schedule_the_slow_retry():
    tracker = RestartTracker(POLICY)
    decisions = _crash_loop(tracker, 0.0, 3)
    last = decisions[-1]
    assert isinstance(last, GiveUp)
    assert last.why.startswith("crashed 3 times within 60 s (last: exited with status 1)")
    assert last.retry_at == 3.0 + 30
    assert not tracker.due(32.9) and tracker.due(33.0)


def test_exits_older_than_the_window_do_not_count():
    tracker = RestartTracker(POLICY)
    tracker.exited(0.0, "x")
    tracker.restarting()
    tracker.exited(10.0, "x")
    tracker.restarting()
    assert isinstance(tracker.exited(71.0, "x"), RestartAfter)  # the one at 0 s fell out


def test_a_slow_retry_that_exits_before_ready_gives_up_again_at_once():
    tracker = RestartTracker(POLICY)
    _crash_loop(tracker, 0.0, 3)
    assert tracker.restarting() is True  # the slow clock's try
    again = tracker.exited(34.0, "exited with status 1")
    assert isinstance(again, GiveUp) and "again on its retry" in again.why
    assert again.retry_at == 64.0


def test_a_slow_retry_that_gets_ready_has_its_whole_crash_budget_back():
    tracker = RestartTracker(POLICY)
    _crash_loop(tracker, 0.0, 3)
    tracker.restarting()
    tracker.ready()
    decisions = _crash_loop(tracker, 40.0, 3)
    assert [type(d) for d in decisions] == [RestartAfter, RestartAfter, GiveUp]


def test_without_a_slow_retry_a_given_up_process_stays_down():
    tracker = RestartTracker(POLICY.model_copy(update={"retry_given_up_s": None}))
    last = _crash_loop(tracker, 0.0, 3)[-1]
    assert isinstance(last, GiveUp) and last.retry_at is None
    assert not tracker.due(10**9)


def test_restarts_off_give_it_up_at_the_first_exit_with_no_retry():
    tracker = RestartTracker(Restart(enabled=False))
    decision = tracker.exited(5.0, "exited with status 0")
    assert decision == GiveUp(why="exited with status 0 and restarts are off for it",
                              retry_at=None)


def test_the_infra_defaults_ride_out_a_30_s_outage():
    """A frontend whose port someone else holds for 30 s exits at once on every start: the
    default policy is still restarting it when the port comes free."""
    tracker = RestartTracker(Supervision().frontend)
    now, start_s = 0.0, 1.0  # each start takes about a second before it fails
    while now < 30.0:
        decision = tracker.exited(now, "exited with status 1")
        assert isinstance(decision, RestartAfter), now
        now = decision.at + start_s
        tracker.restarting()
