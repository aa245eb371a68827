"""A bounded load of streaming chat completions for fault tests: a fixed number of client
threads, each sending one streamed request after the other (with a per-request timeout, so
a request stuck on a hung worker fails instead of holding its thread), every outcome kept
with its start and end time.

    with StreamingChats(endpoint, "demo-model", threads=4, verify=graph_ca_context) as load:
        ...
    load.served_between(t0, t1), load.failed_between(t0, t1)
"""

from __future__ import annotations

import json
import ssl
import threading
import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Outcome:
    started: float  # time.monotonic()
    ended: float
    tokens: int     # content chunks received
    problem: str | None = None  # None: HTTP 200, every chunk parsed, the stream ended [DONE]

    @property
    def ok(self) -> bool:
        return self.problem is None


def stream_chat(client: httpx.Client, endpoint: str, model: str, max_tokens: int) -> Outcome:
    """One streamed chat completion, and what went wrong with it if anything did."""
    started = time.monotonic()
    tokens, problem = 0, "truncated stream"
    try:
        with client.stream("POST", f"{endpoint}/v1/chat/completions", json={
                "model": model, "max_tokens": max_tokens, "stream": True,
                "messages": [{"role": "user", "content": "w3 w4 w5 w6"}]}) as response:
            if response.status_code != 200:
                return Outcome(started, time.monotonic(), 0, f"HTTP {response.status_code}")
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    problem = None
                    break
                chunk = json.loads(line[len("data: "):])
                if "error" in chunk:
                    problem = "error in the stream"
                    break
                if any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                    tokens += 1
    except (httpx.HTTPError, ValueError) as exc:
        problem = type(exc).__name__
    return Outcome(started, time.monotonic(), tokens, problem)


class ClientThreads:
    """Client threads that run `_run(k)` (k: the thread's index) from entering the load to
    leaving it; every load generator of the tests and benchmarks is one."""

    def __init__(self, threads: int, join_timeout_s: float | None = None) -> None:
        self._stop = threading.Event()
        self._join_timeout_s = join_timeout_s
        self._threads = [threading.Thread(target=self._run, args=(k,), daemon=True)
                         for k in range(threads)]

    def _run(self, k: int) -> None:
        raise NotImplementedError

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self._join_timeout_s)


class StreamingChats(ClientThreads):
    def __init__(self, endpoint: str, model: str, *, threads: int = 4, max_tokens: int = 16,
                 timeout_s: float = 5.0, verify: ssl.SSLContext | bool = True) -> None:
        """`verify`: what an https endpoint is checked against (the graph's CA)."""
        super().__init__(threads, join_timeout_s=timeout_s + 5)
        self.endpoint, self.model, self.max_tokens = endpoint, model, max_tokens
        self.verify = verify
        self.timeout_s = timeout_s
        self.outcomes: list[Outcome] = []

    def _run(self, _k: int) -> None:
        with httpx.Client(timeout=self.timeout_s, trust_env=False,
                          verify=self.verify) as client:
            while not self._stop.is_set():
                self.outcomes.append(stream_chat(client, self.endpoint, self.model,
                                                 self.max_tokens))

    def served_between(self, start: float, end: float) -> int:
        """Requests that completed, every token streamed, within [start, end]."""
        return sum(1 for o in list(self.outcomes)
                   if start <= o.started and o.ended <= end and o.ok
                   and o.tokens == self.max_tokens)

    def failed_between(self, start: float, end: float) -> int:
        return sum(1 for o in list(self.outcomes) if start <= o.ended <= end and not o.ok)
