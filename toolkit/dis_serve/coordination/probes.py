"""Is a process ready, and does the router see every worker? Probes, nothing else.

Signals (read from Dynamo 1.6.1's behaviour):
- etcd: `GET /health` answers 200. NATS: its client port accepts a connection and sends
  its `INFO {...}` line (a stopped or hung NATS still has the kernel accept connections
  into its backlog: the accept alone proves nothing).
- a worker: its system port's `GET /health` answers 200 with `"status": "ready"`. Dynamo
  1.6.1 reports "notready" forever unless `DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS` names the
  endpoints whose registration makes it ready; the launch plan sets it for every worker.
- the frontend: it can route the graph's model: `GET /v1/models/<model>/ready` answers 200
  and, when it has just turned 200, a one-token chat is answered 200 too (render/model_ready.py
  says why: the prefill router activates after the ready path says 200); over HTTPS with the
  graph's CA when it serves HTTPS (the plan's `endpoint_tls`), asked of that frontend itself
  (one of several replicas answers at its own address, not at the graph's endpoint). Its
  `/health` and `/v1/models` are no such test: a frontend just (re)started answers /health
  with 200 and chat requests with 404 for about half a second before it has discovered the
  model.
- the balancer in front of several replicas: its monitor (a Unix socket) answers 200 while
  a replica can route the model; keepalived (the floating address) answers nothing: it is
  ready while it runs.
- the router: the same `GET /v1/models/<model>/ready` counts, per worker type (prefill,
  decode), the workers the frontend's model manager has attached to the model in our
  namespace; that is what requests are routed across.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..render.launch_plan import LaunchPlan, ProbeKind, ProcessSpec
from ..render.model_ready import model_ready_path, routed_chat, routed_chat_url
from ..security.http_client import direct_client
from ..topology import ProcessKind

if TYPE_CHECKING:
    import httpx

    from ..security.pki_files import EndpointTls

PROBE_TIMEOUT_S = 2.0


def http_client(timeout_s: float = PROBE_TIMEOUT_S,
                tls: EndpointTls | None = None) -> httpx.Client:
    """The probes' client; with `tls` (a plan's `endpoint_tls`), an HTTPS frontend is
    probed with the graph's CA and client certificate."""
    return direct_client(timeout_s, connect_s=min(0.5, timeout_s), tls=tls)


def tcp_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def nats_answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """NATS greets every client with one `INFO {json}` line before anything else."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            greeting = b""
            while b"\r\n" not in greeting and len(greeting) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                greeting += chunk
            return greeting.startswith(b"INFO ")
    except OSError:
        return False


def _get_json(client: httpx.Client, url: str) -> tuple[int, object]:
    """Status code and JSON body (None if not JSON); (0, None) when nothing answers."""
    import httpx

    try:
        response = client.get(url)
    except httpx.HTTPError:
        return 0, None
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None


def process_ready(client: httpx.Client, spec: ProcessSpec, plan: LaunchPlan) -> bool:
    """One probe of one process; cheap enough to call every poll."""
    return probe_process(client, spec, plan).ready


@dataclass(frozen=True)
class Probe:
    answered: bool  # the process answered at all: it is alive, if perhaps not ready
    ready: bool


def probe_process(client: httpx.Client, spec: ProcessSpec, plan: LaunchPlan, *,
                  starting: bool = False, was_ready: bool = True) -> Probe:
    """One probe of one process. A worker that answers "notready" (say, while etcd is away)
    is alive; one that does not answer within the client's timeout is hung or gone.
    `starting`: the process is not ready yet, and a kind that is ready on accept
    (`ProcessKind.ready_on_accept`) is probed by a TCP connect to its probe's port.
    `was_ready`: the last probe found it ready (a frontend that was not must route a chat
    before it is, `frontend_can_route`)."""
    probe = spec.readiness
    if probe.kind is ProbeKind.RUNNING:
        return Probe(answered=True, ready=True)
    if probe.socket is not None:
        return _probe_socket(probe.socket, probe.url or "", client)
    if starting and spec.kind.ready_on_accept and probe.url is not None:
        from urllib.parse import urlsplit

        port = urlsplit(probe.url).port
        assert port is not None
        accepts = tcp_accepts(port, spec.probed_host)
        return Probe(answered=accepts, ready=accepts)
    if probe.kind is ProbeKind.TCP:
        assert probe.port is not None
        host = probe.host or "127.0.0.1"
        if spec.kind is ProcessKind.NATS:
            timeout = client.timeout.read or PROBE_TIMEOUT_S
            accepts = nats_answers(probe.port, host, timeout)
        else:
            accepts = tcp_accepts(probe.port, host)
        return Probe(answered=accepts, ready=accepts)
    assert probe.url is not None
    if spec.kind is ProcessKind.FRONTEND:
        return frontend_can_route(client, probe.url, plan.model_name, was_ready=was_ready)
    code, body = _get_json(client, probe.url)
    if code != 200:
        return Probe(answered=code != 0, ready=False)
    if spec.kind.reports_readiness:
        return Probe(answered=True,
                     ready=isinstance(body, dict) and body.get("status") == "ready")
    return Probe(answered=True, ready=True)


# A Unix socket's address holds 107 bytes of path (sun_path, less its NUL).
SOCKET_PATH_MAX = 107


@contextlib.contextmanager
def reachable_socket(path: str) -> Iterator[str]:
    """`path`, or where a path too long for a socket address reaches the same socket: through
    its directory's descriptor (/proc/self/fd/N/name, which the kernel resolves like the
    path itself). A run directory deep in a home or a test's tmp_path can be that long."""
    if len(os.fsencode(path)) <= SOCKET_PATH_MAX:
        yield path
        return
    directory = os.open(os.path.dirname(path) or ".", os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{os.path.basename(path)}"
    finally:
        os.close(directory)


def _probe_socket(socket_path: str, url: str, client: httpx.Client) -> Probe:
    """An HTTP GET through a Unix socket (the balancer's monitor: 200 while it can route,
    503 while no replica can), within the client's timeout."""
    import httpx

    timeout = client.timeout.read or PROBE_TIMEOUT_S
    try:
        with reachable_socket(socket_path) as path, httpx.Client(
                transport=httpx.HTTPTransport(uds=path), timeout=timeout,
                trust_env=False) as local:
            code = local.get(url).status_code
    except (httpx.HTTPError, FileNotFoundError):
        return Probe(answered=False, ready=False)
    return Probe(answered=True, ready=code == 200)


def frontend_can_route(client: httpx.Client, url: str, model_name: str, *,
                       was_ready: bool) -> Probe:
    """A frontend's readiness (render/model_ready.py): its model-ready URL (a plan's frontend
    `readiness.url`) answers 200, and, unless it `was_ready` at the last probe, a one-token
    chat to it is answered 200 too. Any answer at all (404 before the model is discovered,
    503 while a worker type is missing or the prefill router activates) says it is alive."""
    ready_code, _body = _get_json(client, url)
    chat_code = None
    if ready_code == 200 and not was_ready:
        chat_code = _post_status(client, routed_chat_url(url), routed_chat(model_name))
    return routing_verdict(ready_code, chat_code)


def routing_verdict(ready_code: int, chat_code: int | None) -> Probe:
    """The rule: ready iff the model-ready path answered 200 and the routed chat, when one
    was sent (`chat_code` None: not sent, the frontend was ready already), answered 200 too.
    0 is "no answer"."""
    routes = ready_code == 200 and chat_code in (None, 200)
    return Probe(answered=ready_code != 0, ready=routes)


def _post_status(client: httpx.Client, url: str, body: dict[str, object]) -> int:
    """The status code of a JSON POST; 0 when nothing answers in time."""
    import httpx

    try:
        return client.post(url, json=body).status_code
    except httpx.HTTPError:
        return 0


@dataclass(frozen=True)
class RouterView:
    """Workers the frontend routes across, per worker type, against what the plan expects."""

    seen: dict[str, int]
    expected: dict[str, int]
    answered: bool = True  # False: the frontend did not answer (seen is then empty)

    @property
    def complete(self) -> bool:
        return all(self.seen.get(t, 0) >= n for t, n in self.expected.items())

    def missing(self) -> list[str]:
        return [t for t, n in self.expected.items() if self.seen.get(t, 0) < n]

    def describe(self) -> str:
        return ", ".join(f"{t} {self.seen.get(t, 0)}/{n}" for t, n in self.expected.items())


def expected_workers(plan: LaunchPlan, workers: list[ProcessSpec] | None = None) -> dict[str, int]:
    """Workers per worker type: of the plan, or of `workers` (those not given up)."""
    counts: dict[str, int] = {}
    for spec in plan.workers if workers is None else workers:
        assert spec.role is not None
        key = spec.role.worker_type
        counts[key] = counts.get(key, 0) + 1
    return counts


def router_view(client: httpx.Client, plan: LaunchPlan,
                workers: list[ProcessSpec] | None = None) -> RouterView:
    """Which workers the router sees, from a frontend itself (not through its balancer)."""
    expected = expected_workers(plan, workers)
    url = f"{plan.router_url or plan.endpoint}{model_ready_path(plan.model_name)}"
    _code, body = _get_json(client, url)  # 503 while a worker type is missing: still read it
    seen: dict[str, int] = {}
    if isinstance(body, dict):
        ns = body.get("namespaces", {}).get(plan.namespace, {})
        types = ns.get("worker_types", {}) if isinstance(ns, dict) else {}
        seen = {t: int(v.get("workers", 0)) for t, v in types.items() if isinstance(v, dict)}
    return RouterView(seen=seen, expected=expected, answered=isinstance(body, dict))
