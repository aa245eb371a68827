"""Requests beyond the topology's token window (model.max_input_tokens + max_output_tokens)
are answered at the edge with HTTP 400 and an OpenAI-style error naming the limit and the
request's count, streaming or not; real etcd, NATS, frontend and mocker processes.

The demo graph's window is 4,096 + 1,024 = 5,120 tokens. Its tokenizer (the mocker's card)
gives one id per corpus word, here "the", plus the chat template's three (`<bos>`, `user`,
`assistant`), so a prompt of n words is n + 3 tokens.
"""

from __future__ import annotations

import json

import httpx
import pytest

from dis_serve.launch.graph import start_graph
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE = 18120
WINDOW = 5120
TEMPLATE_TOKENS = 3


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    topo = Topology.model_validate(relocated_demo("it-limits", BASE))
    assert topo.model.max_seq_len == WINDOW
    with start_graph(topo, run_root=tmp_path_factory.mktemp("limits")) as running:
        yield running


def _body(graph, prompt_tokens: int, **extra) -> dict:
    words = " ".join(["the"] * (prompt_tokens - TEMPLATE_TOKENS))
    return {"model": graph.model_name, "messages": [{"role": "user", "content": words}],
            **extra}


def _post(graph, body: dict) -> httpx.Response:
    return httpx.post(f"{graph.endpoint}/v1/chat/completions", json=body, timeout=60,
                      trust_env=False)


def _stream_status(graph, body: dict) -> tuple[int, str]:
    with httpx.stream("POST", f"{graph.endpoint}/v1/chat/completions", timeout=60,
                      trust_env=False, json=body | {"stream": True}) as response:
        return response.status_code, response.read().decode()


def _limit(text: str) -> dict:
    """The 400's OpenAI-style body, and the limit and count it names (Dynamo 1.6.1 keeps the
    message generic and puts them in `details`)."""
    error = json.loads(text)
    assert (error["code"], error["type"], error["message"]) == (400, "Bad Request",
                                                                "Invalid request"), error
    assert error["details"]["type"] == "context_length", error
    return error["details"]


def test_a_prompt_that_fills_the_window_gets_400_naming_the_limit_and_its_count(graph):
    reply = _post(graph, _body(graph, WINDOW, max_tokens=4))
    assert reply.status_code == 400, reply.text
    details = _limit(reply.text)
    assert (details["limit"], details["actual"]) == (WINDOW, WINDOW)


def test_a_streamed_prompt_beyond_the_window_gets_400_before_any_chunk(graph):
    code, text = _stream_status(graph, _body(graph, WINDOW + 500, max_tokens=4))
    assert code == 400, text
    assert (_limit(text)["limit"], _limit(text)["actual"]) == (WINDOW, WINDOW + 500)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_max_tokens_beyond_what_the_window_leaves_gets_400_naming_the_total(graph, stream):
    body = _body(graph, 13, max_tokens=100_000)
    code, text = _stream_status(graph, body) if stream else (
        (reply := _post(graph, body)).status_code, reply.text)
    assert code == 400, text
    details = _limit(text)
    assert (details["limit"], details["actual"]) == (WINDOW, 13 + 100_000)


def test_a_request_that_fits_the_window_exactly_is_served(graph):
    reply = _post(graph, _body(graph, WINDOW - 8, max_tokens=8))
    assert reply.status_code == 200, reply.text
    usage = reply.json()["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (WINDOW - 8, 8)
