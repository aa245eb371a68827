"""A local graph keeps its planes to itself: NATS with `coordination.nats.auth` refuses a
client without the token while the graph serves, and no secret is in any started process's
command line (world-readable /proc/PID/cmdline) or in any file of the run directory."""

from __future__ import annotations

import asyncio
import secrets
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest

from dis_serve.coordination.doctor import run_doctor
from dis_serve.coordination.nats_view import connect
from dis_serve.launch.graph import start_graph
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.lookup import doctor_target
from dis_serve.security.pki_files import TLS_DIR, PkiPaths, pki_paths
from dis_serve.topology import Topology
from plane_probes import etcdctl, nats_over, no_verify, request_port_accepts, with_client_cert
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE_PORT = 19400


def _chat(graph) -> None:
    response = httpx.post(f"{graph.endpoint}/v1/chat/completions", timeout=30, json={
        "model": graph.model_name, "max_tokens": 4,
        "messages": [{"role": "user", "content": "w3 w4 w5 w6 w7 w8 w9"}]})
    assert response.status_code == 200, response.text


def _graph_processes(graph) -> list[psutil.Process]:
    found = []
    for state in graph.status().processes:
        if state.pid is None:
            continue
        try:
            parent = psutil.Process(state.pid)
            found += [parent, *parent.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return found


async def _nats_connects(url: str, token: str | None, tls: PkiPaths | None) -> bool:
    try:
        nc = await connect(url, token, tls)
    except Exception:  # nats-py raises several types for a refused connect
        return False
    await nc.close()
    return True


@pytest.fixture
def token_file(tmp_path) -> tuple[Path, str]:
    token = secrets.token_urlsafe(24)
    path = tmp_path / "nats-token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path, token


def test_local_nats_refuses_a_client_without_the_token_and_the_token_is_nowhere_visible(
        tmp_path, token_file):
    path, token = token_file
    data = relocated_demo("it-sec-nats", BASE_PORT)
    data["coordination"]["nats"]["auth"] = {"token_file": str(path)}
    topo = Topology.model_validate(data)
    nats_url = topo.coordination.nats.client_url
    root = tmp_path / "home"
    with start_graph(topo, run_root=root) as graph:
        graph.wait_ready(120)
        _chat(graph)
        # Even with the graph's client certificate, the token is asked for.
        tls = pki_paths(graph.run_dir / TLS_DIR)
        assert asyncio.run(_nats_connects(nats_url, None, tls)) is False
        assert asyncio.run(_nats_connects(nats_url, "wrong-" + token, tls)) is False
        assert asyncio.run(_nats_connects(nats_url, token, tls)) is True
        _chat(graph)  # still serving

        processes = _graph_processes(graph)
        assert {p.name() for p in processes} >= {"nats-server"}
        for proc in processes:
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            assert token.encode() not in cmdline, proc.cmdline()

        run = RunDir.for_graph(topo.name, root)
        report = run_doctor(doctor_target(run), window_s=0.5)
        assert report.nats is not None and report.nats.error is None, report.nats

        for file in (p for p in graph.run_dir.rglob("*") if p.is_file()):
            assert token.encode() not in file.read_bytes(), file


TLS_BASE_PORT = 19420


def test_a_default_local_graph_serves_over_mutual_tls_and_refuses_clients_without_its_certs(
        tmp_path):
    topo = Topology.model_validate(relocated_demo("it-sec-tls", TLS_BASE_PORT))
    assert topo.security.tls.mode.value == "auto"
    etcd_port, nats_port = TLS_BASE_PORT + 1, TLS_BASE_PORT + 3
    root = tmp_path / "home"
    with start_graph(topo, run_root=root) as graph:
        graph.wait_ready(120)
        _chat(graph)
        tls_dir = graph.run_dir / "tls"
        ca, cert, key = (str(tls_dir / n) for n in ("ca.pem", "client.pem", "client-key.pem"))

        # etcd: plain HTTP and TLS without a client certificate are refused (both at once:
        # each refusal waits out etcdctl's 3 s command timeout); ours reads.
        with ThreadPoolExecutor(2) as pool:
            refused = list(pool.map(lambda flags: etcdctl(*flags), (
                (f"http://127.0.0.1:{etcd_port}",),
                (f"https://127.0.0.1:{etcd_port}", "--insecure-skip-tls-verify"))))
        assert [r.returncode != 0 for r in refused] == [True, True], refused
        ours = etcdctl(f"https://127.0.0.1:{etcd_port}", "--cacert", ca, "--cert", cert,
                        "--key", key)
        assert ours.returncode == 0 and "dis-serve-it-sec-tls" in ours.stdout, ours.stderr

        # NATS: without TLS, and with TLS but no client certificate, refused.
        url = f"nats://127.0.0.1:{nats_port}"
        assert asyncio.run(nats_over(url, None)) is False
        assert asyncio.run(nats_over(url, no_verify())) is False

        # doctor reads both planes over TLS with the graph's certificates.
        report = run_doctor(doctor_target(RunDir.for_graph(topo.name, root)), window_s=0.5)
        assert report.etcd.error is None and report.nats.error is None, (report.etcd.error,
                                                                         report.nats.error)
        addresses = {r.address for r in report.etcd.registrations if r.address}
        assert len(addresses) == 2, report.etcd.registrations  # prefill's and decode's

        # The request plane: a worker's port speaks TLS and wants a client certificate.
        ours_ctx = with_client_cert(ca, cert, key)
        for address in addresses:
            assert request_port_accepts(address, no_verify()) is False, address
            assert request_port_accepts(address, ours_ctx) is True, address
        _chat(graph)  # still serving after all of that

        # No key in any started process's argv, nor in the plan.
        for proc in _graph_processes(graph):
            assert b"PRIVATE KEY" not in Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        assert "PRIVATE KEY" not in (graph.run_dir / "plan.json").read_text()
        for pem in tls_dir.iterdir():
            assert stat.S_IMODE(pem.stat().st_mode) == 0o600, pem
