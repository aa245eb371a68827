"""The supervisor against real processes: restarts, failover, timeouts, giving up."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import httpx
import psutil
import pytest

from conftest import wait_until
from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.errors import RunError
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.graph import start_graph
from dis_serve.launch.process import same_process
from dis_serve.launch.startup_budget import worker_startup_budget_s
from dis_serve.launch.status import GraphPhase, ProcessState
from dis_serve.topology import Topology
from relocate import relocate

pytestmark = pytest.mark.integration
FAST = {"backoff_base_s": 0.2, "backoff_cap_s": 1.0, "max_failures": 3, "window_s": 60}


def _topology(name: str, base: int, workers_restart: dict | None = None, **pools) -> Topology:
    """The demo graph under another name, on ports base..base+19 (tests use 18000-18999)."""
    data = relocate(load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json"), name, base)
    for role, workers in pools.items():
        data["pools"][role]["workers"] = workers
    if workers_restart:
        data["supervision"]["workers"] |= workers_restart
    return Topology.model_validate(data)


def _chat_ok(graph, max_tokens: int = 4) -> bool:
    response = httpx.post(f"{graph.endpoint}/v1/chat/completions", timeout=30, json={
        "model": graph.model_name, "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "w3 w4"}]})
    return response.status_code == 200


def _all_gone(status) -> bool:
    return not any(same_process(p.pid or 0, p.create_time) for p in status.processes)


def test_a_crashed_worker_is_restarted_and_serves_again(tmp_path):
    with start_graph(_topology("it-restart", 18200, FAST), run_root=tmp_path) as graph:
        victim = graph.status().process("prefill-0")
        os.killpg(victim.pid, signal.SIGKILL)
        assert wait_until(lambda: graph.status().process("prefill-0").restarts == 1
                           and graph.status().process("prefill-0").ready)
        restarted = graph.status().process("prefill-0")
        assert restarted.pid != victim.pid
        assert restarted.state is ProcessState.READY
        assert wait_until(lambda: _chat_ok(graph))
    assert _all_gone(graph.status())


def test_killing_a_decode_worker_mid_stream_keeps_the_endpoint_answering(tmp_path):
    # decode-0 stays dead for the whole test
    topo = _topology("it-failover", 18250, {"backoff_base_s": 60}, decode=2)
    with start_graph(topo, run_root=tmp_path) as graph:
        started = threading.Barrier(7)
        tokens: list[int] = []

        def stream(i: int) -> None:
            count, first = 0, True
            with httpx.stream("POST", f"{graph.endpoint}/v1/chat/completions", timeout=60,
                              json={"model": graph.model_name, "max_tokens": 200,
                                    "stream": True, "ignore_eos": True,
                                    "messages": [{"role": "user", "content": f"w{i} w7"}]}) as r:
                for line in r.iter_lines():
                    if line.startswith("data: {") and '"content"' in line:
                        count += 1
                        if first:
                            first = False
                            started.wait()
            tokens.append(count)

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(6)]
        for thread in threads:
            thread.start()
        started.wait(timeout=30)  # every stream is producing tokens
        os.killpg(graph.status().process("decode-0").pid, signal.SIGKILL)
        for thread in threads:
            thread.join(timeout=60)
        assert tokens == [200] * 6
        assert graph.status().process("decode-0").state is ProcessState.BACKOFF
        assert all(_chat_ok(graph) for _ in range(5))


def _hold_port(port: int, timeout: float = 10.0) -> socket.socket:
    """Listen on `port` as soon as it is free (its owner was just killed)."""
    deadline = time.monotonic() + timeout
    while True:
        holder = socket.socket()
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            holder.bind(("127.0.0.1", port))
            holder.listen()
            return holder
        except OSError:
            holder.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_a_frontend_given_up_over_a_held_port_comes_back_on_the_slow_clock(tmp_path):
    """Another process holds the frontend's port for longer than its crash budget: the
    graph is degraded, not stopped, and serves again by itself once the port is free."""
    topo = _topology("it-slow-retry", 18280)
    data = topo.model_dump(mode="json")
    data["supervision"]["frontend"] |= {"backoff_base_s": 0.2, "backoff_cap_s": 0.2,
                                        "max_failures": 2, "retry_given_up_s": 4}
    with start_graph(Topology.model_validate(data), run_root=tmp_path) as graph:
        frontend = graph.status().process("frontend")
        os.killpg(frontend.pid, signal.SIGKILL)
        with _hold_port(frontend.ports["replica"]):  # behind the balancer
            assert wait_until(lambda: graph.status().process("frontend").state
                              is ProcessState.FAILED, timeout=15)
            status = graph.status()
            assert status.phase is GraphPhase.DEGRADED
            assert any(p.startswith("frontend: crashed 2 times") and "trying again in" in p
                       for p in status.problems)
        assert wait_until(lambda: graph.status().phase is GraphPhase.READY, timeout=20)
        assert graph.status().process("frontend").restarts >= 2
        assert wait_until(lambda: _chat_ok(graph))
    assert _all_gone(graph.status())


def test_the_readiness_budget_defaults_to_the_workers_startup_budget(tmp_path):
    topo = _topology("it-budget", 18350)
    with start_graph(topo, run_root=tmp_path) as graph:
        assert graph.supervisor.ready_timeout_s == worker_startup_budget_s(topo)


def test_a_graph_not_ready_in_time_names_the_process_and_stops_everything(tmp_path):
    with pytest.raises(RunError) as failure:
        start_graph(_topology("it-timeout", 18300), run_root=tmp_path, ready_timeout_s=0.3)
    message = str(failure.value)
    assert "not ready after 0.3 s" in message
    assert "is not ready" in message and "last lines of" in message
    run_dir = tmp_path / "runs" / "it-timeout"
    assert not [p for p in psutil.process_iter(["cmdline"])
                if any(str(run_dir) in part for part in p.info["cmdline"] or [])]


def test_a_worker_that_keeps_crashing_makes_the_graph_give_up(tmp_path):
    topo = _topology("it-giveup", 18350, FAST)
    topo = topo.model_copy(update={"mocker": topo.mocker.model_copy(
        update={"profile_data": str(tmp_path / "missing.npz")})})
    started = time.monotonic()
    with pytest.raises(RunError) as failure:
        start_graph(topo, run_root=tmp_path, ready_timeout_s=60)
    assert time.monotonic() - started < 60
    assert "crashed 3 times" in str(failure.value)
    assert "giving up" in str(failure.value)
