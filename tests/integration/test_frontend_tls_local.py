"""A local graph whose frontend speaks HTTPS (`security.tls.frontend`), with and without
client certificates: it serves over HTTPS with the graph's CA, refuses plain HTTP (and,
with client certificates on, HTTPS without one), and dis-serve's own clients (`status`,
`doctor`, `top`, `bench` with a real AIPerf run) reach it with the graph's files."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from dis_serve.launch.graph import start_graph
from dis_serve.security.pki_files import TLS_DIR, pki_paths
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE_PORT = 19460
CHAT = {"max_tokens": 4, "messages": [{"role": "user", "content": "w3 w4 w5 w6 w7 w8"}]}


def _topology(folder: Path, name: str, base: int, **tls) -> Path:
    data = relocated_demo(name, base)
    data["security"] = {"tls": {"frontend": True, **tls}}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(home: Path, *args: object, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home), "COLUMNS": "160"})


def _chat(endpoint: str, model: str, *, ca: str | None,
          cert: tuple[str, str] | None = None) -> int:
    """A chat with httpx trusting `ca` (None: the system's CAs) and presenting `cert`."""
    context = ssl.create_default_context(cafile=ca)
    if cert is not None:
        context.load_cert_chain(*cert)
    with httpx.Client(verify=context, trust_env=False, timeout=30) as client:
        return client.post(f"{endpoint}/v1/chat/completions",
                           json={"model": model, **CHAT}).status_code


def _refused(call) -> bool:
    try:
        call()
    except (httpx.HTTPError, ssl.SSLError):
        return True
    return False


def _scenario(folder: Path) -> Path:
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump({
        "name": "tiny", "input_tokens": {"mean": 32}, "output_tokens": {"mean": 8},
        "requests": 6, "concurrency": [2], "sla": {"ttft_ms": 2000, "itl_ms": 200}}))
    return path


def _bench(home: Path, topology: Path, endpoint: str, out: Path) -> dict:
    result = _cli(home, "bench", "--scenario", _scenario(home), "--url", endpoint,
                  "--topology", topology, "--out", out)
    assert result.returncode == 0, result.stdout + result.stderr
    [point] = out.glob("points/*.json")
    return json.loads(point.read_text())


def test_an_https_frontend_serves_with_the_graphs_ca_and_our_clients_reach_it(tmp_path):
    home = tmp_path / "home"
    path = _topology(tmp_path, "it-front-tls", BASE_PORT)
    topo = Topology.model_validate(yaml.safe_load(path.read_text()))
    with start_graph(topo, run_root=home) as graph:
        graph.wait_ready(120)
        assert graph.endpoint.startswith("https://127.0.0.1:")
        ca = pki_paths(graph.run_dir / TLS_DIR).ca_cert
        assert _chat(graph.endpoint, graph.model_name, ca=ca) == 200
        # Plain HTTP on the same port, and HTTPS trusting only the system's CAs: refused.
        plain = graph.endpoint.replace("https://", "http://")
        assert _refused(lambda: _chat(plain, graph.model_name, ca=ca))
        assert _refused(lambda: _chat(graph.endpoint, graph.model_name, ca=None))

        status = _cli(home, "status", topo.name)
        assert status.returncode == 0, status.stdout + status.stderr
        assert f"serving {graph.model_name} at {graph.endpoint}" in status.stdout
        doctor = _cli(home, "doctor", topo.name, "--window", "0.5", "--json")
        traffic = json.loads(doctor.stdout)["traffic"]  # the frontend's /metrics, over HTTPS
        assert traffic["unreachable"] == [] and traffic["frontend_requests"], doctor.stdout
        top = _cli(home, "top", topo.name, "--once", "--window", "1", "--json")
        assert top.returncode == 0, top.stdout + top.stderr
        assert json.loads(top.stdout)["unreachable"] == []

        point = _bench(home, path, graph.endpoint, tmp_path / "bench")
        assert point["aiperf"]["errors"] == 0, point["aiperf"]
        assert point["aiperf"]["completed_requests"] >= 6, point["aiperf"]
        assert _chat(graph.endpoint, graph.model_name, ca=ca) == 200


def test_with_client_certificates_on_https_without_one_is_refused_and_bench_presents_it(
        tmp_path):
    home = tmp_path / "home"
    path = _topology(tmp_path, "it-front-mtls", BASE_PORT + 20, frontend_client_certs=True)
    topo = Topology.model_validate(yaml.safe_load(path.read_text()))
    with start_graph(topo, run_root=home) as graph:
        graph.wait_ready(120)
        files = pki_paths(graph.run_dir / TLS_DIR)
        mine = (files.client_cert, files.client_key)
        assert _chat(graph.endpoint, graph.model_name, ca=files.ca_cert, cert=mine) == 200
        assert _refused(lambda: _chat(graph.endpoint, graph.model_name, ca=files.ca_cert))
        plain = graph.endpoint.replace("https://", "http://")
        assert _refused(lambda: _chat(plain, graph.model_name, ca=files.ca_cert))

        status = _cli(home, "status", topo.name)
        assert status.returncode == 0, status.stdout + status.stderr
        point = _bench(home, path, graph.endpoint, tmp_path / "bench")
        assert point["aiperf"]["errors"] == 0, point["aiperf"]
        assert point["aiperf"]["completed_requests"] >= 6, point["aiperf"]


def test_chaos_loads_a_frontend_that_asks_for_client_certificates(tmp_path):
    path = _topology(tmp_path, "it-front-chaos", BASE_PORT + 40, frontend_client_certs=True)
    scenario = tmp_path / "chaos.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "tls-chaos", "reference_run": False,
        "workload": {"name": "tls-load", "input_tokens": {"mean": 32},
                     "output_tokens": {"mean": 16}, "requests": 40, "request_rate": [20],
                     "sla": {"ttft_ms": 2000, "itl_ms": 200}},
        "faults": [{"at_s": 0.5, "action": "pause", "process": "decode-0", "duration_s": 0.5}],
        "limits": {"max_failed_requests": 0, "max_recovery_s": 10}}))
    result = _cli(tmp_path / "home", "chaos", path, "--scenario", scenario,
                  "--out", tmp_path / "out")
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads((tmp_path / "out" / "chaos.json").read_text())
    assert outcome["failed"] == 0 and outcome["requests"] >= 40, outcome
