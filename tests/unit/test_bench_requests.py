"""Per-request records: goodput by input-length bucket and trace replay lag, read from a
real AIPerf per-request export of the sample trace replayed at speed-up 2."""

from __future__ import annotations

import pytest

from dis_serve.bench.requests import (
    bucket_goodput,
    read_records,
    schedule_lag,
    trace_offsets_ms,
)
from dis_serve.errors import RunError
from fixtures.aiperf.load import HERE

TRACE_RUN = HERE / "trace-x2"


def test_every_profiling_request_is_read_in_send_order():
    records = read_records(TRACE_RUN / "profile_export.jsonl")
    trace_rows = (TRACE_RUN / "trace.jsonl").read_text().splitlines()
    assert len(records) == len(trace_rows)
    assert [r.start_ns for r in records] == sorted(r.start_ns for r in records)
    assert all(r.ttft_ms is not None and r.ttft_ms > 0 for r in records)


def test_buckets_split_requests_by_input_length_and_count_the_good_ones():
    records = read_records(TRACE_RUN / "profile_export.jsonl")
    buckets = bucket_goodput(records, [1024, 2048], duration_s=8.0, gpus=2)
    assert [b.label for b in buckets] == ["0-1023", "1024-2047", ">=2048"]
    assert sum(b.requests for b in buckets) == len(records)
    short = buckets[0]
    assert short.requests == sum(1 for r in records if r.input_tokens < 1024)
    assert short.goodput_per_gpu == short.good_requests / 8.0 / 2


def test_empty_buckets_are_left_out():
    records = read_records(TRACE_RUN / "profile_export.jsonl")
    assert [b.label for b in bucket_goodput(records, [10, 20], duration_s=1, gpus=1)] == [
        ">=20"]


def test_trace_offsets_are_scaled_by_the_speedup_from_the_first_row():
    at_1 = trace_offsets_ms(TRACE_RUN / "trace.jsonl", 1.0)
    at_2 = trace_offsets_ms(TRACE_RUN / "trace.jsonl", 2.0)
    assert at_1[0] == at_2[0] == 0.0
    assert at_2 == [t / 2 for t in at_1]


def test_replay_lag_compares_sent_times_with_the_trace():
    records = read_records(TRACE_RUN / "profile_export.jsonl")
    lag = schedule_lag(records, trace_offsets_ms(TRACE_RUN / "trace.jsonl", 2.0))
    assert lag is not None and lag.requests == len(records)
    assert lag.p50_ms <= lag.p99_ms <= lag.max_ms
    # AIPerf kept the trace's spacing to within a few ms at twice its pace.
    assert abs(lag.p99_ms) < 50


def test_replay_lag_is_unknown_when_requests_and_rows_do_not_pair_up():
    records = read_records(TRACE_RUN / "profile_export.jsonl")
    assert schedule_lag(records[:-1], trace_offsets_ms(TRACE_RUN / "trace.jsonl", 2.0)) is None


def test_a_line_that_is_not_a_record_is_one_error(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    path.write_text('{"metrics": {}}\n')
    with pytest.raises(RunError, match=r"profile_export\.jsonl:1: not an AIPerf 0\.13"):
        read_records(path)
