"""A frontend is ready once a chat is routed: its model-ready path answers 200 and, when it
was not ready at the last probe, a one-token chat to it is answered 200 too (Dynamo 1.6.1's
ready path turns 200 before a disaggregated graph's prefill router is activated, and chats
get 503 meanwhile). The "frontend" here is an httpx MockTransport answering as Dynamo's does."""

from __future__ import annotations

import json

import httpx
import pytest
import yaml

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.coordination.probes import Probe, probe_process, routing_verdict
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.model_ready import ROUTED_CHAT_PATH, model_ready_path
from dis_serve.topology import Topology

PLAN = render_launch_plan(Topology.model_validate(yaml.safe_load(DEMO_TOPOLOGY.read_text())),
                          RenderContext(run_dir="/r"))
FRONTEND = PLAN.process("frontend")


class Frontend:
    """Answers the model-ready path with `ready` and chats with `chat`; records requests."""

    def __init__(self, ready: int, chat: int) -> None:
        self.codes = {"GET": ready, "POST": chat}
        self.requests: list[httpx.Request] = []

    def client(self) -> httpx.Client:
        return httpx.Client(transport=httpx.MockTransport(self._answer))

    def _answer(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(self.codes[request.method], json={})

    def chats(self) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == "POST"]


def _probe(frontend: Frontend, *, was_ready: bool) -> Probe:
    with frontend.client() as client:
        return probe_process(client, FRONTEND, PLAN, starting=not was_ready,
                             was_ready=was_ready)


@pytest.mark.parametrize(("ready_code", "chat_code", "expected"), [
    (200, 200, Probe(answered=True, ready=True)),
    (200, None, Probe(answered=True, ready=True)),     # was ready: the GET alone
    (200, 503, Probe(answered=True, ready=False)),     # prefill router still activating
    (200, 0, Probe(answered=True, ready=False)),       # the chat timed out
    (503, None, Probe(answered=True, ready=False)),    # a worker type is missing
    (404, None, Probe(answered=True, ready=False)),    # the model is not discovered yet
    (0, None, Probe(answered=False, ready=False)),     # nothing answers
])
def test_ready_means_the_ready_path_and_the_routed_chat_both_answered_200(
        ready_code, chat_code, expected):
    assert routing_verdict(ready_code, chat_code) == expected


def test_a_frontend_whose_ready_path_says_200_while_chats_get_503_is_not_ready():
    frontend = Frontend(ready=200, chat=503)
    assert _probe(frontend, was_ready=False) == Probe(answered=True, ready=False)


def test_the_routed_chat_is_one_token_of_the_graphs_model_on_the_probed_frontend():
    frontend = Frontend(ready=200, chat=200)
    assert _probe(frontend, was_ready=False) == Probe(answered=True, ready=True)
    [ready, chat] = frontend.requests
    assert ready.url.path == model_ready_path(PLAN.model_name)
    assert (chat.url.host, chat.url.port, chat.url.path) == (
        ready.url.host, ready.url.port, ROUTED_CHAT_PATH)
    body = json.loads(chat.content)
    assert body["model"] == PLAN.model_name and body["max_tokens"] == 1


def test_a_frontend_that_was_ready_is_probed_without_a_chat():
    frontend = Frontend(ready=200, chat=503)
    assert _probe(frontend, was_ready=True).ready
    assert frontend.chats() == []


def test_no_chat_is_sent_while_the_ready_path_says_no():
    frontend = Frontend(ready=503, chat=200)
    assert not _probe(frontend, was_ready=False).ready
    assert frontend.chats() == []


def test_a_unix_socket_deeper_than_a_socket_address_holds_is_still_reached(tmp_path):
    import socket

    from dis_serve.coordination.probes import SOCKET_PATH_MAX, reachable_socket

    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = str(deep / "balancer.sock")
    assert len(path) > SOCKET_PATH_MAX
    with reachable_socket(path) as short, socket.socket(socket.AF_UNIX) as server:
        server.bind(short)
        server.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(short)
    assert (deep / "balancer.sock").exists()
