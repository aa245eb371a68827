"""Exporters: a finished sweep as JSON, CSV and a Markdown report with its plots (arms side
by side for `compare`: ab_report). Measurement never happens here."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .metrics import METRICS, METRICS_BY_KEY, BenchResult, PointResult
from .plots import LATENCY_FILE, PARETO_FILE
from .server_metrics import FrontendLoad, Gauge, PoolLoad
from .validity import invalid_points, point_problems

RESULTS_JSON = "results.json"
RESULTS_CSV = "results.csv"
REPORT_MD = "report.md"


@dataclass(frozen=True)
class ReportFiles:
    json: Path
    csv: Path
    markdown: Path
    pareto_png: Path
    latency_png: Path


def write_report(result: BenchResult, out_dir: Path) -> ReportFiles:
    from .plots import write_latency, write_pareto

    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / RESULTS_JSON
    json_path.write_text(result.model_dump_json(indent=2), encoding="utf-8")
    csv_path = out_dir / RESULTS_CSV
    csv_path.write_text(results_csv(result), encoding="utf-8")
    pareto = write_pareto(result, out_dir)
    latency = write_latency(result, out_dir)
    md_path = out_dir / REPORT_MD
    md_path.write_text(report_markdown(result), encoding="utf-8")
    return ReportFiles(json=json_path, csv=csv_path, markdown=md_path, pareto_png=pareto,
                       latency_png=latency)


def read_result(path: Path) -> BenchResult:
    return BenchResult.model_validate_json(path.read_text(encoding="utf-8"))


# --- CSV ---------------------------------------------------------------------------------
def _pool_columns(result: BenchResult) -> list[str]:
    pools = dict.fromkeys(pool.pool for p in result.points if p.server
                          for pool in p.server.pools)
    return [f"{pool}_{what}_{stat}" for pool in pools
            for what in ("queue_depth", "active_requests", "kv_cache_usage")
            for stat in ("mean", "peak")]


def _pool_values(point: PointResult) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for pool in point.server.pools if point.server else []:
        for what in ("queue_depth", "active_requests", "kv_cache_usage"):
            gauge: Gauge | None = getattr(pool, what)
            values[f"{pool.pool}_{what}_mean"] = gauge.mean if gauge else None
            values[f"{pool.pool}_{what}_peak"] = gauge.peak if gauge else None
    return values


def results_csv(result: BenchResult) -> str:
    pool_cols = _pool_columns(result)
    header = ["load_kind", "load", *(m.key for m in METRICS), "completed_requests",
              "good_requests", "duration_s", "aiperf_wall_s", "gpus", "valid", *pool_cols]
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    for p in result.points:
        pools = _pool_values(p)
        writer.writerow([p.point.kind.value, p.point.display_value,
                         *(_csv(m.get(p)) for m in METRICS),
                         p.aiperf.completed_requests, _csv(p.aiperf.good_requests),
                         _csv(p.aiperf.duration_s), _csv(p.aiperf_wall_s), p.gpus,
                         "no" if point_problems(result.scenario, p) else "yes",
                         *(_csv(pools.get(c)) for c in pool_cols)])
    return buf.getvalue()


def _csv(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


# --- Markdown ----------------------------------------------------------------------------
def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}"


def markdown_table(header: list[str], rows: Iterable[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _gauge(gauge: Gauge | None, scale: float = 1.0, digits: int = 1) -> tuple[str, str]:
    if gauge is None:
        return "n/a", "n/a"
    return _fmt(gauge.mean * scale, digits), _fmt(gauge.peak * scale, digits)


def _pool_row(load: str, pool: PoolLoad) -> list[str]:
    q_mean, q_peak = _gauge(pool.queue_depth, digits=2)
    a_mean, a_peak = _gauge(pool.active_requests, digits=2)
    kv_mean, kv_peak = _gauge(pool.kv_cache_usage, scale=100.0, digits=2)
    return [load, pool.pool, str(pool.workers), q_mean, q_peak, a_mean, a_peak, kv_mean, kv_peak]


def _good_pct(p: PointResult) -> float | None:
    if p.aiperf.good_requests is None or not p.aiperf.completed_requests:
        return None
    return 100.0 * p.aiperf.good_requests / p.aiperf.completed_requests


def _frontend_row(load: str, frontend: FrontendLoad) -> list[str]:
    q_mean, q_peak = _gauge(frontend.queued, digits=2)
    a_mean, a_peak = _gauge(frontend.inflight, digits=2)
    return [load, "frontend", "-", q_mean, q_peak, a_mean, a_peak, "-", "-"]


def report_markdown(result: BenchResult) -> str:
    s = result.scenario
    load = s.load_kind.label
    per_point = (f"{s.requests} requests" if s.requests is not None
                 else f"{s.duration_s:g} s" if s.duration_s is not None else "the whole trace")
    version = result.points[0].aiperf.aiperf_version if result.points else "?"
    lines = [
        f"# Benchmark: `{s.name}` on `{result.topology}`",
        "",
        f"- Endpoint: {result.url}, model `{result.model}`",
        f"- GPUs: {result.gpus} x {result.gpu_type} (from the topology"
        + (f" `{result.topology_file}`" if result.topology_file else "") + ")",
        f"- Workload: {s.workload_label()}, "
        f"{'streaming' if s.streaming else 'not streaming'}; {per_point} per point after "
        f"{s.warmup_requests} warm-up requests",
        "- Prefix cache per point: " + ", ".join(
            f"{p.point.display_value} {p.prefix_cache.value if p.prefix_cache else 'unknown'}"
            for p in result.points)
        + (" (workers restarted before every point)" if s.reset_prefix_cache else ""),
        f"- SLA (goodput counts requests meeting both): TTFT <= {s.sla.ttft_ms:g} ms, "
        f"ITL <= {s.sla.itl_ms:g} ms",
        f"- Load generator: AIPerf {version}; sweep wall time {result.sweep_wall_s:.1f} s"
        + (f" ({result.resumed_points} points reused from an earlier run)"
           if result.resumed_points else ""),
    ]
    if s.description:
        lines += ["", s.description.strip()]
    lines += _validity_section(result)
    lines += ["", "## Throughput and goodput", ""]
    lines += markdown_table(
        [load.capitalize(), "Req/s", "Output tok/s", "Tok/s/GPU", "Tok/s/user",
         "Goodput req/s", "Good %", "Errors"],
        ([_load_cell(result, p), _fmt(p.aiperf.request_throughput, 2),
          _fmt(p.aiperf.output_token_throughput), _fmt(p.tokens_per_s_per_gpu),
          _fmt(p.tokens_per_s_per_user), _fmt(p.aiperf.goodput, 2),
          _fmt(_good_pct(p)),
          str(p.aiperf.errors)] for p in result.points))
    lines += ["", "## Latency (ms)", ""]
    keys = ["ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p90_ms",
            "itl_p99_ms", "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms"]
    lines += markdown_table([load.capitalize(), *(METRICS_BY_KEY[k].title for k in keys)],
                    ([p.point.display_value, *(_fmt(METRICS_BY_KEY[k].get(p), 1) for k in keys)]
                     for p in result.points))
    lines += _server_section(result, load)
    lines += ["", "## Plots", "",
              f"![Pareto: tokens/s/GPU against tokens/s/user]({PARETO_FILE})", "",
              f"![Latency against load]({LATENCY_FILE})", ""]
    return "\n".join(lines)


def _load_cell(result: BenchResult, point: PointResult) -> str:
    invalid = point_problems(result.scenario, point)
    return point.point.display_value + (" **(invalid)**" if invalid else "")


def _validity_section(result: BenchResult) -> list[str]:
    bad = invalid_points(result)
    if not bad:
        return ["", f"All {len(result.points)} points are valid (output generated, errors "
                    f"within {result.scenario.max_error_pct:g}%"
                + (f", every output {result.scenario.fixed_output_tokens} tokens"
                   if result.scenario.fixed_output_tokens is not None else "") + ")."]
    lines = ["", "## INVALID points", "",
             "These points did not measure the graph's service; do not compare or gate "
             "against them:", ""]
    lines += [f"- **{v.load}**: {'; '.join(v.problems)}" for v in bad]
    return lines


def _server_section(result: BenchResult, load: str) -> list[str]:
    lines = ["", "## Server side, per pool", "",
             "Sampled from the frontend's and every worker's Prometheus `/metrics` during "
             "each point's measurement. Mean: summed over the pool's workers (KV cache: "
             "averaged). Peak: the highest reading of any one worker. KV cache in % of the "
             "worker's blocks; n/a where the workers do not publish it (the mocker's "
             "prefill workers).", ""]
    rows = []
    for p in result.points:
        if p.server is None:
            continue
        if p.server.frontend is not None:
            rows.append(_frontend_row(p.point.display_value, p.server.frontend))
        rows += [_pool_row(p.point.display_value, pool) for pool in p.server.pools]
    if rows:
        lines += markdown_table([load.capitalize(), "Pool", "Workers", "Queue mean", "Queue peak",
                         "Active mean", "Active peak", "KV % mean", "KV % peak"], rows)
    else:
        lines.append("No server metrics were collected.")
    unreachable = sorted({u for p in result.points if p.server for u in p.server.unreachable})
    if unreachable:
        lines += ["", "Not reachable during the run: " + ", ".join(unreachable)]
    return lines
