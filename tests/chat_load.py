"""A bounded load of streaming chat completions for fault tests: a fixed number of client
threads, each sending one streamed request after the other (with a per-request timeout, so
a request stuck on a hung worker fails instead of holding its thread), every outcome kept
with its start and end time.

    with StreamingChats(endpoint, "demo-model", threads=4) as load:
        ...
    load.served_between(t0, t1), load.failed_between(t0, t1)
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx


@dataclass(frozen=True)
class Outcome:
    started: float  # time.monotonic()
    ended: float
    ok: bool        # HTTP 200, every chunk parsed, the stream ended with [DONE]
    tokens: int     # content chunks received


def stream_chat(client: httpx.Client, endpoint: str, model: str, max_tokens: int) -> Outcome:
    started = time.monotonic()
    tokens, done = 0, False
    try:
        with client.stream("POST", f"{endpoint}/v1/chat/completions", json={
                "model": model, "max_tokens": max_tokens, "stream": True,
                "messages": [{"role": "user", "content": "w3 w4 w5 w6"}]}) as response:
            if response.status_code != 200:
                return Outcome(started, time.monotonic(), False, 0)
            for line in response.iter_lines():
                if not line.startswith("data: "):
                    continue
                if line == "data: [DONE]":
                    done = True
                    break
                chunk = json.loads(line[len("data: "):])
                if "error" in chunk:
                    break
                if any(c.get("delta", {}).get("content") for c in chunk.get("choices", [])):
                    tokens += 1
    except (httpx.HTTPError, ValueError):
        done = False
    return Outcome(started, time.monotonic(), done, tokens)


class StreamingChats:
    def __init__(self, endpoint: str, model: str, *, threads: int = 4, max_tokens: int = 16,
                 timeout_s: float = 5.0) -> None:
        self.endpoint, self.model, self.max_tokens = endpoint, model, max_tokens
        self.timeout_s = timeout_s
        self.outcomes: list[Outcome] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout_s, trust_env=False) as client:
            while not self._stop.is_set():
                self.outcomes.append(stream_chat(client, self.endpoint, self.model,
                                                 self.max_tokens))

    def __enter__(self) -> StreamingChats:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.timeout_s + 5)

    def served_between(self, start: float, end: float) -> int:
        """Requests that completed, every token streamed, within [start, end]."""
        return sum(1 for o in list(self.outcomes)
                   if start <= o.started and o.ended <= end and o.ok
                   and o.tokens == self.max_tokens)

    def failed_between(self, start: float, end: float) -> int:
        return sum(1 for o in list(self.outcomes) if start <= o.ended <= end and not o.ok)
