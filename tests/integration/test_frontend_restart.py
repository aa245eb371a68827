"""A frontend restarted by the supervisor is reported ready only once it can route the graph's
model (`GET /v1/models/<model>/ready` answers 200), against real etcd, NATS, frontend and
mocker processes, under a load of streaming chats."""

from __future__ import annotations

import os
import signal
import time

import httpx
import pytest

from chat_load import StreamingChats
from dis_serve.launch.graph import start_graph
from dis_serve.launch.status import ProcessState
from dis_serve.render.model_ready import model_ready_path
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE = 18170


def test_a_restarted_frontend_is_reported_ready_only_once_it_routes_the_model(tmp_path,
                                                                               capsys):
    topo = Topology.model_validate(relocated_demo("it-fe-restart", BASE))
    with start_graph(topo, run_root=tmp_path) as graph, \
            StreamingChats(graph.endpoint, graph.model_name, threads=4) as load, \
            httpx.Client(timeout=5, trust_env=False) as client:
        old = graph.status().process("frontend")
        hit = time.monotonic()
        os.killpg(old.pid, signal.SIGKILL)
        deadline = hit + 30
        while time.monotonic() < deadline:
            frontend = graph.status().process("frontend")
            if frontend.restarts == old.restarts + 1 and frontend.state is ProcessState.READY:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the restarted frontend was not ready within 30 s")
        ready = time.monotonic()
        # The moment the supervisor calls it ready, a client is served.
        probe = client.get(f"{graph.endpoint}{model_ready_path(graph.model_name)}")
        chat = client.post(f"{graph.endpoint}/v1/chat/completions", json={
            "model": graph.model_name, "max_tokens": 4,
            "messages": [{"role": "user", "content": "w3 w4"}]})
        assert probe.status_code == 200 and chat.status_code == 200, (probe.text, chat.text)
    not_found = [o for o in load.outcomes if o.problem == "HTTP 404"]
    with capsys.disabled():
        print(f"\nfrontend SIGKILL under 4 streaming clients: ready again after "
              f"{ready - hit:.2f} s; {load.failed_between(hit, ready)} requests failed "
              f"meanwhile, {len(not_found)} of them HTTP 404 from the new frontend before it "
              "knew the model")
