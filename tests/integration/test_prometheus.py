"""`up --prometheus`: a real Prometheus (Debian's) beside the demo graph scrapes every process,
counts exactly the requests sent, answers every dashboard panel's query, and stops with
`down`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import wait_until
from dis_serve.coordination.traffic import frontend_facts
from dis_serve.launch.rundir import RunDir
from dis_serve.observe.prometheus_run import read_record
from fixtures.dynamo.top.capture import send
from relocate import REPLICA_PORT_OFFSET, relocated_demo

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("prometheus") is None,
                                 reason="needs Debian's prometheus (make system-packages)")]
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE_PORT, PROMETHEUS_PORT = 18780, 18799
REQUESTS = 5


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=180,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)}, check=False)


def _query(expr: str) -> list[dict]:
    response = httpx.get(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/query",
                         params={"query": expr}, timeout=5, trust_env=False)
    response.raise_for_status()
    return response.json()["data"]["result"]


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    home = tmp_path_factory.mktemp("prom")
    topology = home / "it-prom.yaml"
    topology.write_text(yaml.safe_dump(relocated_demo("it-prom", BASE_PORT)))
    up = _cli(home, "up", str(topology), "--detach", "--prometheus", "--prometheus-port",
              str(PROMETHEUS_PORT))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"prometheus: http://127.0.0.1:{PROMETHEUS_PORT}" in up.stdout
        yield RunDir.for_graph("it-prom", home)
    finally:
        down = _cli(home, "down", "it-prom")
        assert down.returncode == 0, down.stderr


def _frontend_requests() -> int:
    """The frontend's own count, which includes each readiness check's routed chat."""
    text = httpx.get(f"http://127.0.0.1:{BASE_PORT}/metrics", timeout=5, trust_env=False).text
    return frontend_facts(text)["frontend_requests"]


def test_prometheus_scrapes_every_process_and_counts_the_requests_sent(graph):
    before = _frontend_requests()
    sent: list[dict] = []
    send(f"http://127.0.0.1:{BASE_PORT}", "demo-model", 0, sent, REQUESTS)
    assert len(sent) == REQUESTS

    def counted() -> bool:
        result = _query("sum(dynamo_frontend_requests_total)")
        return bool(result) and float(result[0]["value"][1]) == before + REQUESTS

    assert wait_until(counted, timeout=20), _query("sum(dynamo_frontend_requests_total)")
    def targets() -> list[dict]:
        return httpx.get(f"http://127.0.0.1:{PROMETHEUS_PORT}/api/v1/targets", timeout=5,
                         trust_env=False).json()["data"]["activeTargets"]

    assert sorted(t["labels"]["process"] for t in targets()) == ["decode-0", "frontend",
                                                                 "prefill-0"]
    # The frontend at its own port, not its balancer's.
    assert [t["scrapeUrl"] for t in targets() if t["labels"]["process"] == "frontend"] == [
        f"http://127.0.0.1:{BASE_PORT + REPLICA_PORT_OFFSET}/metrics"]
    assert wait_until(lambda: all(t["health"] == "up" for t in targets()), timeout=10), [
        (t["labels"]["process"], t["health"], t["lastError"]) for t in targets()]


def test_every_dashboard_panel_has_data_on_the_running_graph(graph):
    run = graph
    dashboard = json.loads(next((run.path / "observability" / "grafana" / "dashboards")
                                .glob("*.json")).read_text())
    send(f"http://127.0.0.1:{BASE_PORT}", "demo-model", 1, [], 2)

    def answered(panel: dict) -> bool:
        return any(_query(target["expr"]) for target in panel["targets"])

    empty = [p["title"] for p in dashboard["panels"]
             if not wait_until(lambda p=p: answered(p), timeout=15)]
    assert empty == []


def test_down_stops_the_prometheus_it_recorded(tmp_path):
    topology = tmp_path / "it-prom2.yaml"
    topology.write_text(yaml.safe_dump(relocated_demo("it-prom2", BASE_PORT + 40)))
    up = _cli(tmp_path, "up", str(topology), "--detach", "--prometheus", "--prometheus-port",
              str(PROMETHEUS_PORT - 1))
    record = read_record(RunDir.for_graph("it-prom2", tmp_path))
    down = _cli(tmp_path, "down", "it-prom2")
    assert up.returncode == 0 and down.returncode == 0, up.stderr + down.stderr
    assert record is not None and "stopped prometheus" in down.stdout
    assert not psutil.pid_exists(record.pid) or psutil.Process(record.pid).status() == (
        psutil.STATUS_ZOMBIE)
