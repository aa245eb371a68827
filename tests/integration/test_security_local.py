"""A local graph keeps its planes to itself: NATS with `coordination.nats.auth` refuses a
client without the token while the graph serves, and no secret is in any started process's
command line (world-readable /proc/PID/cmdline) or in any file of the run directory."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import httpx
import psutil
import pytest

from dis_serve.coordination.doctor import run_doctor, target_for_run
from dis_serve.coordination.nats_view import connect
from dis_serve.launch.graph import start_graph
from dis_serve.launch.rundir import RunDir
from dis_serve.topology import Topology
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


async def _nats_connects(url: str, token: str | None) -> bool:
    try:
        nc = await connect(url, token)
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
        assert asyncio.run(_nats_connects(nats_url, None)) is False
        assert asyncio.run(_nats_connects(nats_url, "wrong-" + token)) is False
        assert asyncio.run(_nats_connects(nats_url, token)) is True
        _chat(graph)  # still serving

        processes = _graph_processes(graph)
        assert {p.name() for p in processes} >= {"nats-server"}
        for proc in processes:
            cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
            assert token.encode() not in cmdline, proc.cmdline()

        run = RunDir.for_graph(topo.name, root)
        report = run_doctor(target_for_run(run), window_s=0.5)
        assert report.nats is not None and report.nats.error is None, report.nats

        for file in (p for p in graph.run_dir.rglob("*") if p.is_file()):
            assert token.encode() not in file.read_bytes(), file
