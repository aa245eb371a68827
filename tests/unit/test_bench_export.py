"""Reading AIPerf's summary export: exports from real runs (tests/fixtures/aiperf) become typed
results whose every figure is the one AIPerf wrote."""

from __future__ import annotations

import json

import pytest

from conftest import REPO
from dis_serve.bench.aiperf_export import parse_export, read_export
from dis_serve.errors import RunError

FIXTURES = REPO / "tests" / "fixtures" / "aiperf"


def _raw(name: str) -> dict:
    return json.loads((FIXTURES / name / "profile_export_aiperf.json").read_text())


def _read(name: str):
    return read_export(FIXTURES / name / "profile_export_aiperf.json")


def test_latency_percentiles_are_aiperfs_own():
    raw, summary = _raw("disagg-c4"), _read("disagg-c4")
    for attr, tag in (("ttft_ms", "time_to_first_token"), ("itl_ms", "inter_token_latency"),
                      ("e2e_ms", "request_latency")):
        dist = getattr(summary, attr)
        for stat in ("avg", "p50", "p90", "p99"):
            assert getattr(dist, stat) == raw[tag][stat], (attr, stat)


def test_throughputs_goodput_and_counts_are_aiperfs_own():
    raw, summary = _raw("disagg-c4"), _read("disagg-c4")
    assert summary.request_throughput == raw["request_throughput"]["avg"]
    assert summary.output_token_throughput == raw["output_token_throughput"]["avg"]
    assert summary.output_token_throughput_per_user == (
        raw["output_token_throughput_per_user"]["avg"])
    assert summary.goodput == raw["goodput"]["avg"]
    assert summary.good_requests == raw["good_request_count"]["avg"]
    assert summary.completed_requests == raw["request_count"]["avg"]
    assert summary.duration_s == raw["benchmark_duration"]["avg"]
    assert summary.aiperf_version == "0.13.0"


def test_a_clean_run_has_no_errors():
    summary = _read("disagg-c4")
    assert summary.errors == 0
    assert summary.error_kinds == {}


def test_failed_requests_are_counted_with_their_kind():
    raw, summary = _raw("timeouts"), _read("timeouts")
    assert summary.errors == raw["error_request_count"]["avg"] > 0
    assert summary.error_kinds == {"TimeoutError": summary.errors}
    assert summary.completed_requests == raw["request_count"]["avg"]


def test_non_streaming_run_has_no_ttft_itl_or_goodput():
    summary = _read("non-streaming")
    assert summary.ttft_ms is None
    assert summary.itl_ms is None
    assert summary.goodput is None
    assert summary.output_token_throughput_per_user is None
    assert summary.e2e_ms.p50 == _raw("non-streaming")["request_latency"]["p50"]


def test_unexpected_unit_is_one_clear_error():
    raw = _raw("disagg-c4")
    raw["time_to_first_token"]["unit"] = "s"
    with pytest.raises(RunError, match="time_to_first_token' is in 's', expected 'ms'"):
        parse_export(raw, "export.json")


def test_missing_required_metric_is_one_clear_error():
    raw = _raw("disagg-c4")
    del raw["request_latency"]
    with pytest.raises(RunError, match=r"export.json: AIPerf export has no 'request_latency'"):
        parse_export(raw, "export.json")


def test_missing_export_file_names_it(tmp_path):
    with pytest.raises(RunError, match="AIPerf wrote no summary export"):
        read_export(tmp_path / "profile_export_aiperf.json")


def test_garbage_export_file_names_it(tmp_path):
    path = tmp_path / "profile_export_aiperf.json"
    path.write_text("{not json")
    with pytest.raises(RunError, match="not a readable AIPerf export"):
        read_export(path)
