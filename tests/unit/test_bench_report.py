"""Exporters: JSON that reads back, CSV with one row per point, Markdown with every table,
and both PNG plots."""

from __future__ import annotations

import csv
import io

from dis_serve.bench.metrics import METRICS
from dis_serve.bench.report import (
    read_result,
    report_markdown,
    results_csv,
    write_report,
)
from fixtures.aiperf.load import smoke_result

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_writes_json_csv_markdown_and_both_plots(tmp_path):
    files = write_report(smoke_result(), tmp_path)
    for path in (files.json, files.csv, files.markdown, files.pareto_png, files.latency_png):
        assert path.is_file() and path.stat().st_size > 0, path
    assert files.pareto_png.read_bytes().startswith(PNG_MAGIC)
    assert files.latency_png.read_bytes().startswith(PNG_MAGIC)


def test_json_reads_back_as_the_same_result(tmp_path):
    result = smoke_result()
    files = write_report(result, tmp_path)
    assert read_result(files.json) == result


def test_csv_has_a_row_per_point_with_every_metric():
    result = smoke_result()
    rows = list(csv.DictReader(io.StringIO(results_csv(result))))
    assert [r["load"] for r in rows] == [p.point.display_value for p in result.points]
    for metric in METRICS:
        assert metric.key in rows[0]
    assert float(rows[1]["tokens_per_s_per_gpu"]) == float(
        f"{result.points[1].tokens_per_s_per_gpu:.6g}")


def test_csv_has_per_pool_server_columns():
    header = results_csv(smoke_result()).splitlines()[0].split(",")
    for column in ("prefill_queue_depth_mean", "decode_active_requests_peak",
                   "decode_kv_cache_usage_mean"):
        assert column in header


def test_tokens_per_gpu_divides_by_the_topologys_gpus():
    result = smoke_result()
    for p in result.points:
        assert p.gpus == result.gpus
        assert p.tokens_per_s_per_gpu == p.aiperf.output_token_throughput / result.gpus


def test_markdown_has_throughput_latency_pool_tables_and_plots():
    text = report_markdown(smoke_result())
    for heading in ("## Throughput and goodput", "## Latency (ms)", "## Server side, per pool",
                    "![Pareto", "![Latency"):
        assert heading in text
    assert "| 4 | decode | 1 |" in text
    assert "| 1 | frontend |" in text
    assert "TTFT <= 500 ms, ITL <= 50 ms" in text


def test_markdown_says_where_the_gpu_count_came_from():
    result = smoke_result()
    assert f"GPUs: {result.gpus} x h100-sxm (from the topology `{result.topology_file}`)" in (
        report_markdown(result))
