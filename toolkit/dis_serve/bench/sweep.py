"""A sweep: AIPerf once per load level against one running graph, each finished point kept.

Layout of the output directory:

    points/<kind>-<value>.json   the point's result: the checkpoint a rerun resumes from
    points/<kind>-<value>/       AIPerf's artifacts for that point, and aiperf.log

A point file is written (atomically) only after AIPerf finished and its export was read, so
an interrupted sweep leaves whole points or nothing. On a rerun a point is reused only when
its fingerprint (scenario, topology, endpoint, point) matches; otherwise it runs again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import ValidationError

from ..errors import RunError
from ..files.atomic_file import write_atomic
from .aiperf_export import read_export
from .aiperf_run import (
    EXPORT_FILE,
    SERVER_METRICS_FILE,
    AiperfTarget,
    build_argv,
    failure_message,
    run_aiperf,
)
from .metrics import BenchResult, PointDetail, PointResult, point_result
from .progress import FrontendRequestCounter, SilentObserver, SweepObserver
from .requests import (
    RECORDS_FILE,
    bucket_goodput,
    read_records,
    schedule_lag,
    trace_offsets_ms,
)
from .scenario import CacheState, Scenario, SweepPoint
from .server_metrics import read_server_metrics
from .target import BenchTarget
from .tokenizer_cache import hub_cache_view

POINTS_DIR = "points"
LOCK_FILE = ".sweep.lock"
TOKENIZER_CACHE_DIR = "tokenizer-cache"
_COUNTER_PERIOD_S = 1.0

# Called before each point that runs (not for reused ones); says what the point starts on.
BeforePoint = Callable[[SweepPoint], CacheState]


def fingerprint(scenario: Scenario, target: BenchTarget, point: SweepPoint) -> str:
    text = json.dumps({
        "scenario": scenario.model_dump(mode="json", exclude={"description"}),
        "trace": scenario.trace.digest() if scenario.trace else None,
        "topology": target.topology_digest, "url": target.url, "model": target.model,
        "point": point.model_dump(mode="json"),
    }, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def point_file(out_dir: Path, point: SweepPoint) -> Path:
    return out_dir / POINTS_DIR / f"{point.slug}.json"


def artifact_dir(out_dir: Path, point: SweepPoint) -> Path:
    return out_dir / POINTS_DIR / point.slug


def load_checkpoint(path: Path, expected_fingerprint: str) -> PointResult | None:
    """The saved point if it is whole and belongs to this sweep, else None (run it again)."""
    try:
        result = PointResult.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, ValidationError):
        return None
    return result if result.fingerprint == expected_fingerprint else None


def _tokenizer_for_aiperf(tokenizer: str, out_dir: Path) -> tuple[str, dict[str, str]]:
    """The tokenizer name and environment AIPerf loads it with (see tokenizer_cache)."""
    if not Path(tokenizer).is_dir():
        return tokenizer, {}
    view = hub_cache_view(Path(tokenizer), out_dir / TOKENIZER_CACHE_DIR)
    return view.repo_id, view.env


def run_point(scenario: Scenario, target: BenchTarget, point: SweepPoint, out_dir: Path,
              observer: SweepObserver, cache: CacheState | None = None) -> PointResult:
    """Run AIPerf for one point and save its result file."""
    artifacts = artifact_dir(out_dir, point)
    if artifacts.exists():
        shutil.rmtree(artifacts)  # what an interrupted run of this point left
    tokenizer, env = _tokenizer_for_aiperf(target.tokenizer, out_dir)
    aiperf = AiperfTarget(url=target.url, model=target.model, tokenizer=tokenizer,
                          extra_metrics_urls=target.worker_metrics_urls, tls=target.tls)
    argv = build_argv(scenario, point, aiperf, artifacts)
    expected = None
    if scenario.requests is not None:
        expected = scenario.requests + scenario.warmup_requests
    observer.point_started(point, expected, scenario.duration_s)
    counter = FrontendRequestCounter(target.url, tls=target.tls)
    last_read = [0.0]

    def tick(elapsed: float) -> None:
        if elapsed - last_read[0] >= _COUNTER_PERIOD_S:
            last_read[0] = elapsed
            observer.point_tick(point, elapsed, counter.finished())
        else:
            observer.point_tick(point, elapsed, None)

    try:
        run = run_aiperf(argv, artifacts, timeout_s=scenario.point_timeout_s,
                         extra_env=env | aiperf.env,
                         on_phase=lambda phase, event: observer.point_phase(point, phase, event),
                         on_tick=tick)
    except BaseException:
        observer.point_failed(point)
        raise
    finally:
        counter.close()
    if run.returncode != 0 or not (artifacts / EXPORT_FILE).is_file():
        observer.point_failed(point)
        raise RunError(failure_message(run, point))
    summary = read_export(artifacts / EXPORT_FILE)
    server = read_server_metrics(artifacts / SERVER_METRICS_FILE, list(target.endpoints))
    result = point_result(point, summary, gpus=target.gpus, server=server,
                          aiperf_wall_s=run.wall_s,
                          fingerprint=fingerprint(scenario, target, point),
                          detail=point_detail(scenario, point, artifacts, cache,
                                              duration_s=summary.duration_s, gpus=target.gpus))
    write_atomic(point_file(out_dir, point), result.model_dump_json(indent=2))
    observer.point_finished(point, result)
    return result


@contextlib.contextmanager
def sweep_lock(out_dir: Path) -> Iterator[None]:
    """Hold `out_dir` for one sweep: a second `bench` into it fails at once instead of
    running AIPerf beside the first and deleting its artifacts. The kernel drops the lock
    when the holder dies, however it dies."""
    out_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(out_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            raise RunError(f"another sweep (pid {holder}) is writing to {out_dir}; wait for "
                           "it or give --out another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def point_detail(scenario: Scenario, point: SweepPoint, artifacts: Path,
                 cache: CacheState | None, *, duration_s: float, gpus: int) -> PointDetail:
    """Buckets and replay lag from AIPerf's per-request export (when it wrote one)."""
    records_path = artifacts / RECORDS_FILE
    if not records_path.is_file():
        return PointDetail(prefix_cache=cache)
    records = read_records(records_path)
    lag = None
    if scenario.trace is not None:
        lag = schedule_lag(records, trace_offsets_ms(scenario.trace.file, point.value))
    return PointDetail(
        prefix_cache=cache,
        input_buckets=bucket_goodput(records, scenario.input_buckets, duration_s=duration_s,
                                     gpus=gpus),
        schedule_lag=lag)


def run_sweep(scenario: Scenario, target: BenchTarget, out_dir: Path,
              observer: SweepObserver | None = None,
              before_point: BeforePoint | None = None) -> BenchResult:
    """Every point of the scenario, reusing finished ones; RunError at the first failed point
    (the points finished before it stay on disk). Without `before_point` the first point
    that runs is taken as warm: the graph's history is unknown."""
    with sweep_lock(out_dir):
        return _run_points(scenario, target, out_dir, observer or SilentObserver(),
                           before_point)


def _run_points(scenario: Scenario, target: BenchTarget, out_dir: Path,
                observer: SweepObserver, before_point: BeforePoint | None) -> BenchResult:
    (out_dir / POINTS_DIR).mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    results: list[PointResult] = []
    reused = 0
    for point in scenario.points():
        saved = load_checkpoint(point_file(out_dir, point),
                                fingerprint(scenario, target, point))
        if saved is not None:
            reused += 1
            observer.point_reused(point, saved)
            results.append(saved)
            continue
        cache = before_point(point) if before_point is not None else CacheState.WARM
        results.append(run_point(scenario, target, point, out_dir, observer, cache))
    return BenchResult(
        scenario=scenario, topology=target.topology_name, topology_file=target.topology_file,
        gpus=target.gpus, gpu_type=target.gpu_type, url=target.url, model=target.model,
        points=results, sweep_wall_s=time.monotonic() - start, resumed_points=reused)
