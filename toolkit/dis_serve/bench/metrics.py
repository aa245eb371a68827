"""Results of a benchmark: one frozen record per sweep point, the whole run, and the table of
reported metrics (name, unit, which direction is better) that the CSV, the report, `compare`
and the CI gate all read, so they can never disagree on what a metric means.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from .aiperf_export import AiperfSummary
from .requests import BucketGoodput, ScheduleLag
from .scenario import CacheState, Scenario, SweepPoint
from .server_metrics import ServerLoad

SCHEMA_VERSION = 1


class PointResult(BaseModel):
    """One sweep point: AIPerf's measurement, the per-GPU view, and the server's side."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    point: SweepPoint
    aiperf: AiperfSummary
    gpus: int = Field(description="GPUs the topology's pools use (never typed in by hand).")
    tokens_per_s_per_gpu: float = Field(description="Output tokens/s divided by the GPUs.")
    tokens_per_s_per_user: float | None = Field(
        description="Output tokens/s one request sees while decoding (AIPerf's per-user rate).")
    server: ServerLoad | None = Field(description="Per-pool load; None if nothing was scraped.")
    aiperf_wall_s: float = Field(description="Wall time of the `aiperf profile` process.")
    fingerprint: str = Field(
        description="Hash of scenario, topology, endpoint and point: a resumed sweep reuses "
                    "this file only when it matches.")
    prefix_cache: CacheState | None = Field(
        default=None, description="cold: the workers were started right before the point; "
                                  "warm: earlier traffic may have filled their prefix cache.")
    input_buckets: list[BucketGoodput] = Field(
        default_factory=list, description="Goodput per GPU by input-length bucket.")
    schedule_lag: ScheduleLag | None = Field(
        default=None, description="Trace replay: requests sent vs the trace's timestamps.")


class PointDetail(BaseModel):
    """What a point adds beyond AIPerf's summary: cache state, buckets, replay lag."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    prefix_cache: CacheState | None = None
    input_buckets: list[BucketGoodput] = Field(default_factory=list)
    schedule_lag: ScheduleLag | None = None


def point_result(point: SweepPoint, summary: AiperfSummary, *, gpus: int,
                 server: ServerLoad | None, aiperf_wall_s: float,
                 fingerprint: str, detail: PointDetail | None = None) -> PointResult:
    return PointResult(
        point=point, aiperf=summary, gpus=gpus,
        tokens_per_s_per_gpu=summary.output_token_throughput / gpus,
        tokens_per_s_per_user=summary.output_token_throughput_per_user,
        server=server, aiperf_wall_s=aiperf_wall_s, fingerprint=fingerprint,
        **(detail or PointDetail()).model_dump())


class BenchResult(BaseModel):
    """A finished sweep: what ran against what, and every point in sweep order."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: int = SCHEMA_VERSION
    scenario: Scenario
    topology: str = Field(description="Topology name.")
    topology_file: str | None = Field(description="The topology file the GPU count came from.")
    gpus: int
    gpu_type: str
    url: str
    model: str
    points: list[PointResult]
    sweep_wall_s: float = Field(
        description="Wall time of this invocation's sweep (points reused from an earlier, "
                    "interrupted run cost nothing here).")
    resumed_points: int = Field(default=0, description="Points reused from earlier runs.")


@dataclass(frozen=True)
class Metric:
    key: str
    title: str
    unit: str
    higher_is_better: bool
    get: Callable[[PointResult], float | None]
    gated: bool = True


def _lat(attr: str, stat: str) -> Callable[[PointResult], float | None]:
    def get(r: PointResult) -> float | None:
        dist = getattr(r.aiperf, attr)
        return None if dist is None else getattr(dist, stat)
    return get


# p99 of a short CI run is one or two requests: reported, never gated.
METRICS: tuple[Metric, ...] = (
    Metric("request_throughput", "Requests/s", "req/s", True,
           lambda r: r.aiperf.request_throughput),
    Metric("output_token_throughput", "Output tokens/s", "tok/s", True,
           lambda r: r.aiperf.output_token_throughput),
    Metric("tokens_per_s_per_gpu", "Tokens/s/GPU", "tok/s/GPU", True,
           lambda r: r.tokens_per_s_per_gpu),
    Metric("tokens_per_s_per_user", "Tokens/s/user", "tok/s/user", True,
           lambda r: r.tokens_per_s_per_user),
    Metric("goodput", "Goodput", "req/s", True, lambda r: r.aiperf.goodput),
    Metric("goodput_per_gpu", "Goodput/GPU", "req/s/GPU", True,
           lambda r: None if r.aiperf.goodput is None else r.aiperf.goodput / r.gpus),
    Metric("prefix_cache_hit_pct", "Prefix-cache hits", "% of prompt tokens", True,
           lambda r: r.aiperf.prefix_cache_hit_pct),
    Metric("ttft_p50_ms", "TTFT p50", "ms", False, _lat("ttft_ms", "p50")),
    Metric("ttft_p90_ms", "TTFT p90", "ms", False, _lat("ttft_ms", "p90")),
    Metric("ttft_p99_ms", "TTFT p99", "ms", False, _lat("ttft_ms", "p99"), gated=False),
    Metric("itl_p50_ms", "ITL p50", "ms", False, _lat("itl_ms", "p50")),
    Metric("itl_p90_ms", "ITL p90", "ms", False, _lat("itl_ms", "p90")),
    Metric("itl_p99_ms", "ITL p99", "ms", False, _lat("itl_ms", "p99"), gated=False),
    Metric("e2e_p50_ms", "E2E p50", "ms", False, _lat("e2e_ms", "p50")),
    Metric("e2e_p90_ms", "E2E p90", "ms", False, _lat("e2e_ms", "p90")),
    Metric("e2e_p99_ms", "E2E p99", "ms", False, _lat("e2e_ms", "p99"), gated=False),
    Metric("errors", "Errors", "requests", False, lambda r: float(r.aiperf.errors)),
)
METRICS_BY_KEY = {m.key: m for m in METRICS}
