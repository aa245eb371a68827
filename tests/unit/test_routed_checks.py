"""The frontend's readiness as the hand-run script and Kubernetes ask it: the model-ready GET,
then the one-token chat of render/model_ready.py, to the same frontend. The script's check is
run by bash against a `curl` on PATH that records its arguments; the pod's check is executed
with urllib's `urlopen` recorded (nothing is sent anywhere)."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.placements.kubernetes.manifests import render_manifests
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.model_ready import ROUTED_CHAT_PATH, model_ready_path, routed_chat
from dis_serve.render.shell_words import routed_check
from dis_serve.topology import Topology


def _demo(**security) -> Topology:
    data = yaml.safe_load(DEMO_TOPOLOGY.read_text())
    if security:
        data["security"] = security
    return Topology.model_validate(data)


def _curl_calls(check: str, tmp_path: Path) -> list[list[str]]:
    """Run `check` in bash with a curl that records each call's argv (one file per call)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    curl = bin_dir / "curl"
    curl.write_text("#!/usr/bin/env bash\n"
                    'out="$CURL_LOG.$(date +%s%N)"; printf \'%s\\n\' "$@" > "$out"\n')
    curl.chmod(0o755)
    env = os.environ | {"PATH": f"{bin_dir}:{os.environ['PATH']}",
                        "CURL_LOG": str(tmp_path / "call")}
    subprocess.run(["bash", "-c", check], env=env, check=True, timeout=10)
    return [path.read_text().splitlines() for path in sorted(tmp_path.glob("call.*"))]


@pytest.mark.parametrize("tls", [{"tls": {"mode": "off"}},
                                 {"tls": {"frontend": True, "frontend_client_certs": True}}])
def test_the_scripts_last_wait_asks_the_ready_path_then_posts_the_one_token_chat(
        tmp_path, tls):
    plan = render_launch_plan(_demo(**tls), RenderContext(run_dir="/r"))
    frontend = plan.process("frontend")
    [ready, chat] = _curl_calls(routed_check(frontend, plan.model_name), tmp_path)
    assert ready[-1] == frontend.readiness.url
    assert chat[-1] == frontend.readiness.url.replace(
        model_ready_path(plan.model_name), ROUTED_CHAT_PATH)
    assert json.loads(chat[chat.index("-d") + 1]) == routed_chat(plan.model_name)
    assert chat[chat.index("-H") + 1] == "Content-Type: application/json"
    tls_words = ready[ready.index("-o") + 2:-1]  # what curl_tls_words gave the GET
    assert chat[chat.index("-o") + 2:chat.index("-H")] == tls_words


def _frontend_startup_probe(topo: Topology) -> dict:
    dgd = next(d for d in render_manifests(topo) if d["kind"] == "DynamoGraphDeployment")
    [frontend] = [c for c in dgd["spec"]["components"] if c["type"] == "frontend"]
    return frontend["podTemplate"]["spec"]["containers"][0]["startupProbe"]


@pytest.mark.parametrize("security", [{}, {"tls": {"frontend_client_certs": True}},
                                      {"tls": {"mode": "off"}}])
def test_the_kubernetes_frontends_startup_probe_asks_the_ready_path_then_posts_the_chat(
        monkeypatch, security):
    topo = _demo(**security)
    calls: list[object] = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda what, **_: calls.append(what))

    class Context:
        check_hostname = True

        def load_cert_chain(self, *files: str) -> None:
            calls.append(files)

    monkeypatch.setattr(ssl, "create_default_context", lambda **_: Context())
    command = _frontend_startup_probe(topo)["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    exec(compile(command[2], "startupProbe", "exec"), {})  # our own generated check
    *_, ready, chat = calls
    assert ready.endswith(f":8000{model_ready_path(topo.model.name)}")
    assert isinstance(chat, urllib.request.Request) and chat.full_url.endswith(
        f":8000{ROUTED_CHAT_PATH}")
    assert json.loads(chat.data) == routed_chat(topo.model.name)
    assert (len(calls) == 3) == topo.security.tls.frontend_client_certs  # the chain loaded
