"""The request plane between a Kubernetes graph's pods, run for real: a Dynamo frontend and a
mocker worker with the TLS environment the rendered pods carry and the certificates of the
Secret manifests `render` writes, their mounts stood in for by a directory. Pod addresses
are nobody's certificate names, so the callers check the one name the pods' certificate holds
(DYN_TCP_TLS_SERVER_NAME): the graph's own worker is served, a worker holding another graph's
certificate is not, and the worker's /health (its readiness probe) says ready with the pod's
environment. File discovery and the ZMQ event plane stand in for the operator's."""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import GRAPHS, wait_until
from dis_serve.launch.model_card import write_model_card
from dis_serve.placements.kubernetes.manifests import render_dgd
from dis_serve.placements.kubernetes.secrets import tls_secret_docs
from dis_serve.placements.kubernetes.tls import CLIENT_TLS_MOUNT, client_secret
from dis_serve.topology import Topology

pytestmark = pytest.mark.integration
HTTP_PORT = 19461
SYSTEM_PORT = 19462


def _topology(name: str) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["name"] = name
    return Topology.model_validate(data)


def _pods_certificate(topo: Topology, directory: Path) -> Path:
    """The pods' Secret as kubelet mounts it: its keys as files."""
    [secret] = [d for d in tls_secret_docs(topo, None)
                if d["metadata"]["name"] == client_secret(topo)]
    directory.mkdir(parents=True)
    for key, value in secret["data"].items():
        (directory / key).write_bytes(base64.b64decode(value))
    return directory


def _environment(topo: Topology, mount: Path, tmp_path: Path) -> dict[str, str]:
    """A worker pod's rendered environment, its Secret's mount stood in for by `mount`, with
    the operator's discovery and namespace replaced by this machine's."""
    [worker] = [c for c in render_dgd(topo)["spec"]["components"] if c["type"] == "decode"]
    container = worker["podTemplate"]["spec"]["containers"][0]
    rendered = {e["name"]: e["value"].replace(CLIENT_TLS_MOUNT, str(mount))
                for e in container["env"] if "value" in e}
    assert "DYN_TCP_TLS_SERVER_NAME" in rendered
    del rendered["HF_HOME"]  # the model cache's mount: the card is a local directory here
    return {**os.environ, **rendered, "DYN_SYSTEM_PORT": str(SYSTEM_PORT),
            "DYN_DISCOVERY_BACKEND": "file", "DYN_FILE_KV": str(tmp_path / "discovery"),
            "DYN_REQUEST_PLANE": "tcp", "DYN_EVENT_PLANE": "zmq",
            "DYN_NAMESPACE": "k8s-request-plane", "DYN_TCP_RPC_HOST": "127.0.0.1",
            "DYN_TCP_RESPONSE_STREAM_HOST": "127.0.0.1", "DYN_EVENT_PLANE_HOST": "127.0.0.1",
            "DYN_SYSTEM_HOST": "127.0.0.1"}


def _worker_ready() -> bool:
    try:
        body = httpx.get(f"http://127.0.0.1:{SYSTEM_PORT}/health", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return body.get("status") == "ready"


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", *argv], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)


def _chat() -> int:
    try:
        return httpx.post(f"http://127.0.0.1:{HTTP_PORT}/v1/chat/completions", timeout=10,
                          json={"model": "m", "max_tokens": 4,
                                "messages": [{"role": "user", "content": "w3 w4 w5"}]}
                          ).status_code
    except httpx.HTTPError:
        return 0


def _model_listed() -> bool:
    try:
        models = httpx.get(f"http://127.0.0.1:{HTTP_PORT}/v1/models", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return False
    return any(m.get("id") == "m" for m in models.get("data", []))


def test_only_a_worker_holding_the_graphs_certificate_is_served(tmp_path):
    topo = _topology("k8s-rp")
    ours = _environment(topo, _pods_certificate(topo, tmp_path / "ours"), tmp_path)
    stranger_topo = _topology("k8s-rp-stranger")
    stranger = _environment(
        topo, _pods_certificate(stranger_topo, tmp_path / "stranger"), tmp_path)
    card = write_model_card(tmp_path / "card", topo.model.resolved_architecture(), name="m")
    worker = ["dynamo.mocker", "--model-path", str(card), "--model-name", "m"]
    processes = []
    try:
        processes.append(_start(["dynamo.frontend", "--http-host", "127.0.0.1",
                                 "--http-port", str(HTTP_PORT), "--router-mode",
                                 "round-robin"], ours, tmp_path / "frontend.log"))
        intruder = _start(worker, stranger, tmp_path / "stranger.log")
        processes.append(intruder)
        # Registered, but its certificate is not the graph's CA's: no request reaches it.
        assert wait_until(_model_listed, 60)
        assert [_chat() for _ in range(3)] == [503] * 3
        _stop(intruder)
        processes.append(_start(worker, ours, tmp_path / "worker.log"))
        assert wait_for_200(90), (tmp_path / "worker.log").read_text()[-2000:]
        # The pod's readiness probe asks /health on the system port: with the pod's own
        # environment the worker says ready.
        assert wait_until(_worker_ready, 10)
    finally:
        for process in reversed(processes):
            _stop(process)


def wait_for_200(timeout: float) -> bool:
    # The stranger's entry leaves the file registry within seconds: until then a request
    # may still be sent its way and fail.
    return wait_until(lambda: _chat() == 200, timeout)
