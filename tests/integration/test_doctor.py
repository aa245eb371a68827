"""`dis-serve doctor` against real graphs: etcd leases, NATS, the router's metrics."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import REPO, wait_until
from dis_serve.coordination.etcd_view import client as etcd_client
from dis_serve.coordination.etcd_view import namespace_keys
from dis_serve.coordination.nats_view import connect
from dis_serve.coordination.traffic import frontend_facts
from dis_serve.launch.graph import start_graph
from dis_serve.launch.run_lock import lock_holder
from dis_serve.launch.rundir import RunDir
from dis_serve.topology import ProcessKind, Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
# Dynamo reads ETCD_LEASE_TTL (seconds, default 30); a short one keeps the expiry wait short.
LEASE_TTL_S = 5
# The killed worker must stay dead while its registration is watched.
NO_RESTART = {"workers": {"backoff_base_s": 300, "backoff_cap_s": 300}}
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")


def _topology(name: str, base: int, decode: int = 1, **changes) -> Topology:
    data = relocated_demo(name, base) | changes
    data["pools"]["decode"]["workers"] = decode
    return Topology.model_validate(data)


def _doctor(run_cli, *args: str) -> tuple[int, dict]:
    result = run_cli("doctor", *args, "--json", "--window", "1")
    assert result.exit_code in (0, 1), result
    return result.exit_code, json.loads(result.stdout)


def _chat(graph, n: int) -> None:
    for i in range(n):
        response = httpx.post(f"{graph.endpoint}/v1/chat/completions", timeout=30, json={
            "model": graph.model_name, "max_tokens": 4,
            "messages": [{"role": "user", "content": f"w{i + 3} w4 w5 w6 w7 w8 w9"}]})
        assert response.status_code == 200, response.text


def _finding(report: dict, code: str) -> list[dict]:
    return [f for f in report["findings"] if f["code"] == code]


def test_a_killed_worker_is_stale_until_its_lease_expires_then_disappears(
        tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("ETCD_LEASE_TTL", str(LEASE_TTL_S))
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    topo = _topology("it-doc-kill", 18600, decode=2, supervision=NO_RESTART)
    with start_graph(topo, run_root=tmp_path) as graph:
        code, healthy = _doctor(run_cli, topo.name)
        assert code == 0, healthy["findings"]
        assert {r["lease_ttl_s"] for r in healthy["etcd"]["registrations"]} == {LEASE_TTL_S}
        victim = next(r["instance_id"] for r in healthy["etcd"]["registrations"]
                      if r["process"] == "decode-1")
        os.killpg(graph.status().process("decode-1").pid, signal.SIGKILL)

        code, stale = _doctor(run_cli, topo.name)
        assert code == 1, json.dumps(stale["etcd"], indent=1)
        assert [f["subject"] for f in _finding(stale, "stale-registration")] == [
            f"backend/{victim}"]

        def registered() -> bool:
            _code, report = _doctor(run_cli, topo.name)
            return victim in {r["instance_id"] for r in report["etcd"]["registrations"]}

        assert wait_until(lambda: not registered(), timeout=LEASE_TTL_S + 10)
        code, gone = _doctor(run_cli, topo.name)
        assert code == 1
        assert [f["code"] for f in gone["findings"]] == ["missing-workers"]
        assert gone["findings"][0]["message"] == "1 of 2 backend workers registered"


def _stray_prefill(graph, served_name: str, system_port: int):
    """A prefill worker started by hand in the graph's namespace, serving another model name
    (a typo in one pool's served name): it registers, and the router never attaches it."""
    argv = list(graph.plan.process("prefill-0").argv)
    argv[argv.index("--model-name") + 1] = served_name
    # The plan's environment and the graph's secrets (etcd's client certificate, as PEM
    # text): a worker without them is refused by the graph's etcd.
    env = os.environ | graph.plan.process("prefill-0").env | graph.prepared.secrets.env_for(
        ProcessKind.WORKER) | {"DYN_SYSTEM_PORT": str(system_port)}
    return subprocess.Popen(argv, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_kv_events_off_and_a_prefill_worker_the_router_never_uses_are_named(
        tmp_path, monkeypatch, run_cli):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    topo = _topology("it-doc-kv", 18620, router={"mode": "kv", "kv_events": False})
    stray_port = 18639
    with start_graph(topo, run_root=tmp_path) as graph:
        stray = _stray_prefill(graph, "typo-model", stray_port)
        try:
            assert wait_until(lambda: httpx.get(
                f"http://127.0.0.1:{stray_port}/health").status_code == 200
                if _answers(stray_port) else False, timeout=60)
            _chat(graph, 3)
            # The readiness checks' routed chats count too.
            served = frontend_facts(httpx.get(f"{graph.endpoint}/metrics").text)
            code, report = _doctor(run_cli, topo.name, "--metrics",
                                   f"http://127.0.0.1:{stray_port}/metrics")
        finally:
            os.killpg(stray.pid, signal.SIGKILL)
            stray.wait()
    assert code == 1
    codes = {f["code"] for f in report["findings"]}
    assert codes == {"router-gets-no-kv-events", "prefill-registered-but-idle",
                     "extra-workers"}
    [no_events] = _finding(report, "router-gets-no-kv-events")
    assert "--no-router-kv-events" in no_events["cause"]
    [idle] = _finding(report, "prefill-registered-but-idle")
    assert "it serves model 'typo-model', the requests were for 'demo-model'" in idle["cause"]
    assert served["frontend_requests"] >= 3
    assert f"0 of the frontend's {served['frontend_requests']} requests" in idle["message"]


def _answers(port: int) -> bool:
    try:
        httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
    except httpx.HTTPError:
        return False
    return True


def _cli(home, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], text=True,
                          capture_output=True, input=stdin, timeout=120, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home)})


def _on_shared_planes(tmp_path, name: str, base: int, etcd: str, nats: str) -> Path:
    data = relocated_demo(name, base)
    data["coordination"]["etcd"] |= {"mode": "external", "url": etcd}
    data["coordination"]["nats"] |= {"mode": "external", "url": nats}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


async def _add_stream(url: str, name: str, namespace: str) -> None:
    nc = await connect(url)
    await nc.jsm().add_stream(name=name, subjects=[f"namespace.{namespace}.>"])
    await nc.close()


async def _stream_names(url: str) -> set[str]:
    nc = await connect(url)
    names = {s.config.name for s in await nc.jsm().streams_info()}
    await nc.close()
    return names


async def _keys(url: str, namespace: str) -> set[str]:
    async with etcd_client(url) as etcd:
        return {key for key, _value, _lease in await namespace_keys(etcd, namespace)}


def test_a_crashed_graph_on_shared_etcd_and_nats_is_cleaned_and_nothing_else(tmp_path):
    """Graph A's embedded etcd and NATS are the shared ones; graph B runs on them. The streams
    stand in for what a namespace's components may create (Dynamo 1.6.1 itself creates none
    with the default planes)."""
    # Shared over plain URLs: graph A's planes without TLS (external planes with the owner's
    # certificates are not wired yet).
    topo_a = _topology("it-doc-shared-a", 18640, security={"tls": {"mode": "off"}})
    etcd, nats = "http://127.0.0.1:18641", "nats://127.0.0.1:18643"
    home = tmp_path / "home"
    with start_graph(topo_a, run_root=tmp_path / "a"):
        b_file = _on_shared_planes(tmp_path, "it-doc-shared-b", 18660, etcd, nats)
        assert _cli(home, "up", str(b_file), "--detach").returncode == 0
        ns_a, ns_b = topo_a.namespace, "dis-serve-it-doc-shared-b"
        clash = _cli(home, "up", str(_on_shared_planes(tmp_path, topo_a.name, 18680, etcd,
                                                       nats)), "--detach")
        assert clash.returncode == 2 and "in use by a live graph" in clash.stderr, clash
        dead = _on_shared_planes(tmp_path, "it-doc-nowhere", 18690, "http://127.0.0.1:18699",
                                 nats)
        assert "etcd does not answer" in _cli(home, "up", str(dead), "--detach").stderr

        asyncio.run(_add_stream(nats, "DOC_A", ns_a))
        asyncio.run(_add_stream(nats, "DOC_B", ns_b))
        keys_a = asyncio.run(_keys(etcd, ns_a))
        # A crash: the supervisor and its keeper (which would start another) are killed,
        # its children die with it and revoke no lease.
        run_b = RunDir.for_graph("it-doc-shared-b", home)
        state = run_b.read_state()
        os.killpg(lock_holder(run_b), signal.SIGKILL)  # the keeper's group holds both
        assert wait_until(lambda: not any(
            psutil.pid_exists(p.pid) and psutil.Process(p.pid).status() != "zombie"
            for p in state.processes if p.pid))
        keys_b = asyncio.run(_keys(etcd, ns_b))
        assert keys_b  # left behind until the leases expire

        shown = _cli(home, "doctor", "--clean", ns_b, "--etcd", etcd, "--nats", nats,
                     stdin="n\n")
        assert shown.returncode == 1
        assert all(key in shown.stdout for key in keys_b) and "stream DOC_B" in shown.stdout
        assert ns_a not in shown.stdout
        refused = _cli(home, "doctor", "--clean", ns_a, "--etcd", etcd, "--yes")
        assert refused.returncode == 2 and "running graph owns it" in refused.stderr

        down = _cli(home, "down", "it-doc-shared-b")
        assert down.returncode == 0, down
        assert f"removed {len(keys_b)} etcd keys and 1 JetStream streams" in down.stdout
        assert asyncio.run(_keys(etcd, ns_b)) == set()
        assert asyncio.run(_keys(etcd, ns_a)) == keys_a
        assert asyncio.run(_stream_names(nats)) == {"DOC_A"}


@pytest.mark.parametrize("args", [["--help"], ["validate", "graphs/demo.yaml"]])
def test_the_light_commands_import_no_coordination_client(args):
    done = subprocess.run([sys.executable, "-X", "importtime", DIS_SERVE, *args],
                          capture_output=True, text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0]
                for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert imported.isdisjoint({"aetcd", "grpc", "nats", "dynamo"})


def test_an_etcd_and_nats_that_do_not_answer_are_findings_not_a_hang(run_cli):
    result = run_cli("doctor", "--etcd", "http://127.0.0.1:18698", "--nats",
                     "nats://127.0.0.1:18699", "--namespace", "dis-serve-nowhere", "--json")
    assert result.exit_code == 1
    codes = [f["code"] for f in json.loads(result.stdout)["findings"]]
    assert codes == ["etcd-unreachable", "nats-unreachable"]


def test_watch_refreshes_count_times_and_exits_with_the_last_reports_code(tmp_path):
    topo = _topology("it-doc-watch", 18700, decode=2, supervision=NO_RESTART)
    log = tmp_path / "watch.log"
    with start_graph(topo, run_root=tmp_path) as graph, \
            log.open("w") as out:
        watch = subprocess.Popen(
            [DIS_SERVE, "doctor", topo.name, "--watch", "--count", "3", "--interval", "1",
             "--window", "0.5"], stdout=out, stderr=subprocess.STDOUT, text=True,
            env=os.environ | {"DIS_SERVE_HOME": str(tmp_path), "PYTHONUNBUFFERED": "1",
                              "COLUMNS": "200"})
        try:
            assert wait_until(lambda: "report 1 of 3" in log.read_text(), timeout=60)
            # The first report saw a healthy graph; the last one sees a dead worker.
            os.killpg(graph.status().process("decode-1").pid, signal.SIGKILL)
            code = watch.wait(timeout=60)
        finally:
            if watch.poll() is None:
                watch.kill()
                watch.wait()
    text = log.read_text()
    heads = list(re.finditer(r"^report (\d) of 3 at ", text, re.MULTILINE))
    assert [h.group(1) for h in heads] == ["1", "2", "3"], text
    assert f"{topo.name}: healthy" in text[heads[0].end():heads[1].start()]
    assert "stale-registration" in text[heads[2].end():]
    assert code == 1, text
