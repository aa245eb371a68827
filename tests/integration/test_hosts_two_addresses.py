"""`render --target hosts` for real: two "nodes" that are two loopback addresses of this
machine (127.0.0.2 runs etcd, NATS and the frontend; 127.0.0.3 runs both workers), each
started from its own generated script, with NATS token authentication on."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from conftest import single_head_data, wait_until
from dis_serve.engines import engine_for
from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.launch.model_card import write_model_card
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.topology import Backend, Topology
from relocate import relocate

pytestmark = pytest.mark.integration
# The program a mocker worker runs as (its engine's module).
MOCKER_MODULE = engine_for(Backend.MOCKER).module
BASE = 18500
TOKEN_ENV = "IT_HOSTS_NATS_TOKEN"
TOKEN = "it-hosts-token-5f3a9c"


def _topology(tmp_path: Path) -> Topology:
    data = relocate(single_head_data("demo-two-hosts.yaml"),
                    "it-hosts", BASE)
    data["coordination"]["nats"]["auth"] = {"token_env": TOKEN_ENV}
    return Topology.model_validate(data)


def _start(script: Path, run_dir: Path) -> subprocess.Popen[bytes]:
    # The scripts call etcd, nats-server and python3 by name, as on a node that has them.
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    env = os.environ | {"DIS_SERVE_RUN_DIR": str(run_dir), TOKEN_ENV: TOKEN, "PATH": path}
    log = (run_dir / f"{script.stem}.out").open("wb")
    return subprocess.Popen(["bash", str(script)], env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _listening(pids: set[int]) -> dict[str, set[str]]:
    """Process name -> addresses it listens on, for these process trees."""
    found: dict[str, set[str]] = {}
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids:
            name = " ".join(psutil.Process(conn.pid).cmdline()[:3])
            found.setdefault(name, set()).add(conn.laddr.ip)
    return found


def _tree(proc: subprocess.Popen[bytes]) -> set[int]:
    try:
        root = psutil.Process(proc.pid)
        return {root.pid} | {c.pid for c in root.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def _served(url: str, ca: ssl.SSLContext) -> bool:
    try:
        ready = httpx.get(f"{url}/v1/models/demo-model/ready", timeout=2, trust_env=False,
                          verify=ca)
    except httpx.HTTPError:
        return False
    return ready.status_code == 200


def test_head_and_worker_scripts_on_two_addresses_serve_and_stop_cleanly(tmp_path):
    topo = _topology(tmp_path)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name, text in render_hosts_files(topo).items():
        (run_dir / name).write_text(text)
    write_model_card(run_dir / "model-card", topo.model.resolved_architecture(),
                     name=topo.model.id)
    write_cluster_ca(topo, run_dir)  # what `render` writes into tls/ beside the scripts
    head = _start(run_dir / "node-head.sh", run_dir)
    workers = _start(run_dir / "node-workers.sh", run_dir)
    # HTTPS off loopback by default, the head's certificate signed by the graph's CA.
    endpoint = f"https://127.0.0.2:{BASE}"
    ca = ssl.create_default_context(cafile=run_dir / "tls" / "ca.pem")
    try:
        assert wait_until(lambda: _served(endpoint, ca), timeout=90), \
            (run_dir / "node-workers.out").read_text()[-2000:]
        reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                           verify=ca, json={"model": "demo-model", "max_tokens": 8,
                                            "messages": [{"role": "user", "content": "w3 w4 w5"}]})
        assert reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8

        listening = _listening(_tree(head) | _tree(workers))
        head_side = {ip for name, ips in listening.items() if MOCKER_MODULE not in name
                     for ip in ips}
        worker_side = {ip for name, ips in listening.items() if MOCKER_MODULE in name
                       for ip in ips}
        assert head_side == {"127.0.0.2"}, listening
        assert worker_side == {"127.0.0.3"}, listening
    finally:
        for script in (workers, head):
            script.send_signal(signal.SIGTERM)
            script.wait(timeout=30)
    assert wait_until(lambda: not _processes_in(run_dir), timeout=15), _processes_in(run_dir)
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in (".log", ".out", ".sh", ".md", ".conf"):
            assert TOKEN not in path.read_text(errors="replace"), path


def _processes_in(run_dir: Path) -> list[str]:
    """Live processes whose command line or environment names the run directory."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status", "pid"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
            continue
        if any(str(run_dir) in part for part in proc.info["cmdline"] or []):
            found.append(" ".join(proc.info["cmdline"]))
    return found


def test_a_worker_script_without_the_token_variable_stops_at_once(tmp_path):
    topo = _topology(tmp_path)
    script = tmp_path / "node-workers.sh"
    script.write_text(render_hosts_files(topo)["node-workers.sh"])
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    start = time.monotonic()
    result = subprocess.run(["bash", str(script)], env=env | {"DIS_SERVE_RUN_DIR": str(tmp_path)},
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode != 0 and time.monotonic() - start < 10
    assert f"set {TOKEN_ENV} to the NATS token" in result.stderr
