"""A real Prometheus beside a running graph (`up --prometheus`): Debian's `prometheus` (2.42,
`apt-get install prometheus`; PyPI has no Prometheus server, only clients), configured with
observe/prometheus_config.py's files in the run directory's observability/, its data there
too, and a record (observability/prometheus.json: pid, start time, URL) so `down` from
another shell stops exactly that process and nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import httpx
from pydantic import BaseModel, ConfigDict

from ..errors import PreflightError, RunError
from ..files.atomic_file import write_atomic
from ..launch.process import create_time, same_process
from ..launch.rundir import RunDir
from ..launch.stopping import stop_processes
from ..render.run_layout import OBSERVABILITY_DIR
from .prometheus_config import render_observability

RECORD_FILE = "prometheus.json"
READY_TIMEOUT_S = 30.0
STOP_GRACE_S = 10.0


class PrometheusRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    pid: int
    create_time: float
    url: str


def _record_path(run: RunDir) -> Path:
    return run.path / OBSERVABILITY_DIR / RECORD_FILE


def start_prometheus(run: RunDir, port: int, binary: str = "prometheus") -> PrometheusRecord:
    """Write the config, start Prometheus on 127.0.0.1:`port` and wait until it is ready."""
    found = shutil.which(binary)
    if found is None:
        raise PreflightError(f"no {binary!r} on PATH; install it (as root: apt-get install -y "
                             "prometheus, or make system-packages)")
    out = run.path / OBSERVABILITY_DIR
    for relative, text in render_observability(run.read_plan(), port).items():
        (out / relative).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out / relative, text)
    url = f"http://127.0.0.1:{port}"
    log = run.open_log("prometheus")
    try:
        proc = subprocess.Popen(
            [found, f"--config.file={out / 'prometheus.yml'}",
             f"--storage.tsdb.path={out / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
             "--storage.tsdb.retention.time=1d"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
    finally:
        os.close(log)
    record = PrometheusRecord(pid=proc.pid, create_time=create_time(proc.pid) or 0.0, url=url)
    write_atomic(_record_path(run), record.model_dump_json(indent=2))
    _wait_ready(proc, url, run)
    return record


def _wait_ready(proc: subprocess.Popen, url: str, run: RunDir) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = " | ".join(run.tail("prometheus", 3))
            raise RunError(f"prometheus exited with {proc.returncode} before it was ready "
                           f"({tail}); see {run.log_file('prometheus')}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_prometheus(run)
    raise RunError(f"prometheus at {url} was not ready within {READY_TIMEOUT_S:g} s; see "
                   f"{run.log_file('prometheus')}")


def read_record(run: RunDir) -> PrometheusRecord | None:
    try:
        return PrometheusRecord.model_validate_json(_record_path(run).read_text())
    except (OSError, ValueError):
        return None


def stop_prometheus(run: RunDir) -> str | None:
    """Stop the Prometheus this run directory records, if it still runs; a line saying so."""
    record = read_record(run)
    if record is None:
        return None
    _record_path(run).unlink(missing_ok=True)
    if not same_process(record.pid, record.create_time):
        return None
    stop_processes([record.pid], STOP_GRACE_S)
    return f"stopped prometheus ({record.url})"
