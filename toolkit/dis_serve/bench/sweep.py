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
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ..atomic_file import write_atomic
from ..errors import RunError
from .aiperf_export import read_export
from .aiperf_run import (
    EXPORT_FILE,
    SERVER_METRICS_FILE,
    AiperfTarget,
    build_argv,
    failure_message,
    run_aiperf,
)
from .metrics import BenchResult, PointResult, point_result
from .progress import FrontendRequestCounter, SilentObserver, SweepObserver
from .scenario import Scenario, SweepPoint
from .server_metrics import read_server_metrics
from .target import BenchTarget

POINTS_DIR = "points"
LOCK_FILE = ".sweep.lock"
_COUNTER_PERIOD_S = 1.0


def fingerprint(scenario: Scenario, target: BenchTarget, point: SweepPoint) -> str:
    text = json.dumps({
        "scenario": scenario.model_dump(mode="json", exclude={"description"}),
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


def run_point(scenario: Scenario, target: BenchTarget, point: SweepPoint, out_dir: Path,
              observer: SweepObserver) -> PointResult:
    """Run AIPerf for one point and save its result file."""
    artifacts = artifact_dir(out_dir, point)
    if artifacts.exists():
        shutil.rmtree(artifacts)  # what an interrupted run of this point left
    argv = build_argv(scenario, point, AiperfTarget(
        url=target.url, model=target.model, tokenizer=target.tokenizer,
        extra_metrics_urls=target.worker_metrics_urls), artifacts)
    expected = None
    if scenario.requests is not None:
        expected = scenario.requests + scenario.warmup_requests
    observer.point_started(point, expected, scenario.duration_s)
    counter = FrontendRequestCounter(target.url)
    last_read = [0.0]

    def tick(elapsed: float) -> None:
        if elapsed - last_read[0] >= _COUNTER_PERIOD_S:
            last_read[0] = elapsed
            observer.point_tick(point, elapsed, counter.finished())
        else:
            observer.point_tick(point, elapsed, None)

    try:
        run = run_aiperf(argv, artifacts, timeout_s=scenario.point_timeout_s,
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
                          fingerprint=fingerprint(scenario, target, point))
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


def run_sweep(scenario: Scenario, target: BenchTarget, out_dir: Path,
              observer: SweepObserver | None = None) -> BenchResult:
    """Every point of the scenario, reusing finished ones; RunError at the first failed point
    (the points finished before it stay on disk)."""
    with sweep_lock(out_dir):
        return _run_points(scenario, target, out_dir, observer or SilentObserver())


def _run_points(scenario: Scenario, target: BenchTarget, out_dir: Path,
                observer: SweepObserver) -> BenchResult:
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
        results.append(run_point(scenario, target, point, out_dir, observer))
    return BenchResult(
        scenario=scenario, topology=target.topology_name, topology_file=target.topology_file,
        gpus=target.gpus, gpu_type=target.gpu_type, url=target.url, model=target.model,
        points=results, sweep_wall_s=time.monotonic() - start, resumed_points=reused)
