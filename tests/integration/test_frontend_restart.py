"""A frontend restarted by the supervisor gets no request before it can route the graph's model,
against real etcd, NATS, haproxy, frontend and mocker processes, under a load of streaming chats.

With the balancer (the default, `frontend.balancer: true`) clients connect to haproxy, which
holds their requests while the frontend is down or still discovering the model; only the
streams the killed frontend was answering are lost. Without it (`balancer: false`) clients
connect to the frontend itself, and see its restart."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from urllib.parse import urlsplit

import httpx
import pytest

from chat_load import StreamingChats
from conftest import wait_until
from dis_serve.launch.graph import start_graph
from dis_serve.launch.status import ProcessState
from dis_serve.render.model_ready import model_ready_path
from dis_serve.topology import ProcessKind, Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE = 18170
DIRECT_BASE = 18190
LOAD = 8  # requests served before the kill, and again after the restart


def _kill_the_frontend_under_load(topo: Topology, run_root):
    """SIGKILL the frontend under 4 streaming clients; once the supervisor calls the new one
    ready, a ready probe and a chat at the graph's endpoint. (load, killed at, ready at,
    the graph's processes' kinds, its endpoint, the frontend's port)."""
    with start_graph(topo, run_root=run_root) as graph, \
            StreamingChats(graph.endpoint, graph.model_name, threads=4) as load, \
            httpx.Client(timeout=5, trust_env=False) as client:
        status = graph.status()
        old = status.process("frontend")
        # Streams in flight when it dies, and load before and after.
        assert wait_until(lambda: load.served_between(0, time.monotonic()) >= LOAD), \
            "the graph did not serve the load before the kill"
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
        assert wait_until(lambda: load.served_between(ready, time.monotonic()) >= LOAD), \
            "the graph did not serve the load after the restart"
    kinds = {p.kind for p in status.processes}
    return load, hit, ready, kinds, graph.endpoint, next(iter(old.ports.values()))


def test_clients_of_a_restarting_frontend_get_no_404_and_no_503(tmp_path, capsys):
    topo = Topology.model_validate(relocated_demo("it-fe-restart", BASE))
    load, hit, ready, kinds, endpoint, _ = _kill_the_frontend_under_load(topo, tmp_path)
    assert ProcessKind.BALANCER in kinds and urlsplit(endpoint).port == BASE
    problems = Counter(o.problem for o in load.outcomes if not o.ok)
    assert problems["HTTP 404"] == 0 and problems["HTTP 503"] == 0, problems
    during = [o for o in load.outcomes if o.started <= ready and o.ended >= hit]
    slowest = max((o.ended - o.started for o in during), default=0.0)
    with capsys.disabled():
        print(f"\nbalancer: frontend SIGKILL under 4 streaming clients: ready again after "
              f"{ready - hit:.2f} s; {len(during)} requests meanwhile, "
              f"{load.failed_between(hit, ready)} failed: {dict(problems)} (of "
              f"{len(load.outcomes)} in all); the slowest took {slowest:.2f} s")


def test_without_the_balancer_clients_reach_the_frontend_itself_and_see_its_restart(
        tmp_path, capsys):
    data = relocated_demo("it-fe-direct", DIRECT_BASE)
    data["frontend"] |= {"balancer": False}
    topo = Topology.model_validate(data)
    load, hit, ready, kinds, endpoint, port = _kill_the_frontend_under_load(topo, tmp_path)
    assert ProcessKind.BALANCER not in kinds
    assert urlsplit(endpoint).port == port == DIRECT_BASE
    problems = Counter(o.problem for o in load.outcomes if not o.ok)
    # Refused while it is down, 404 while the new one discovers the model.
    assert problems["ConnectError"] + problems["HTTP 404"] > 0, problems
    with capsys.disabled():
        print(f"\nno balancer: frontend SIGKILL under 4 streaming clients: ready again after "
              f"{ready - hit:.2f} s; {load.failed_between(hit, ready)} of "
              f"{len(load.outcomes)} requests failed: {dict(problems)}")
