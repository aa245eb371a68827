"""Probes of a graph's planes as a client that may or may not hold the graph's files: etcd
through etcdctl, NATS through nats-py, a worker's TCP request port through `ssl`.

The local security tests call them from this process; the attacker tests run this file
inside the attacker's network namespace (`python plane_probes.py JSON`: the attempts in, one
JSON line of outcomes out), so each attempt really comes from another machine on the
cluster network. Only the standard library and nats-py are imported at module level.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import ssl
import subprocess
import sys
from pathlib import Path

ETCDCTL = str(Path(sys.executable).parent / "etcdctl")


def etcdctl(endpoint: str, *flags: str, command: tuple[str, ...] = ("get", "--prefix", "v1/"),
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """etcdctl `command` against `endpoint` with `flags` (certificates or none), run under
    `prefix` (e.g. nsenter into a namespace)."""
    return subprocess.run([*prefix, ETCDCTL, "--endpoints", endpoint, "--dial-timeout", "2s",
                           "--command-timeout", "3s", *flags, *command],
                          capture_output=True, text=True, timeout=30, check=False)


def no_verify() -> ssl.SSLContext:
    """What an attacker without the graph's files has: TLS, no CA, no client certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def with_client_cert(ca: str, cert: str, key: str) -> ssl.SSLContext:
    """What the graph's own clients have: its CA and its client certificate."""
    context = ssl.create_default_context(cafile=ca)
    context.load_cert_chain(cert, key)
    return context


ACCEPTED = "accepted"


def _refused(exc: BaseException) -> str:
    return f"refused ({type(exc).__name__}: {str(exc).strip()[:80] or 'closed'})"


async def nats_attempt(url: str, context: ssl.SSLContext | None, token: str | None = None,
                       subject: str | None = None) -> str:
    """ACCEPTED when a NATS session with `url` is set up (and, with `subject`, the server
    takes a subscription to it), else why not."""
    import nats

    async def quiet(_exc: Exception) -> None:
        return None

    try:
        nc = await asyncio.wait_for(nats.connect(
            url, tls=context, token=token, connect_timeout=2, allow_reconnect=False,
            max_reconnect_attempts=1, reconnect_time_wait=0, error_cb=quiet), timeout=5)
    except Exception as exc:  # refused: nats-py raises several types
        return _refused(exc)
    try:
        if subject is not None:
            await nc.subscribe(subject)
            await nc.flush(timeout=2)
        return ACCEPTED if nc.is_connected else "refused (closed by the server)"
    except Exception as exc:  # the server closed the session
        return _refused(exc)
    finally:
        await nc.close()


async def nats_over(url: str, context: ssl.SSLContext | None, token: str | None = None,
                    subject: str | None = None) -> bool:
    return await nats_attempt(url, context, token, subject) == ACCEPTED


def request_port_attempt(address: str, context: ssl.SSLContext) -> str:
    """ACCEPTED when a TLS session with a worker's request port survives the handshake and
    a first write (TLS 1.3 servers refuse a missing client certificate right after it)."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"\x00")
            tls.settimeout(1)
            try:
                return ACCEPTED if tls.recv(1) != b"" else "refused (closed after handshake)"
            except TimeoutError:
                return ACCEPTED  # still open: the server took us
    except (OSError, ssl.SSLError) as exc:
        return _refused(exc)


def request_port_accepts(address: str, context: ssl.SSLContext) -> bool:
    return request_port_attempt(address, context) == ACCEPTED


def plain_tcp_attempt(address: str) -> str:
    """ACCEPTED when clear-text bytes sent to a port get anything back but a TLS alert
    (0x15) or a closed connection: what a server that reads clear text would do."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as sock:
            sock.sendall(b"\x00\x00\x00\x10" + b"\x81\xa4test\xa5probe" * 4)
            sock.settimeout(2)
            try:
                reply = sock.recv(64)
            except TimeoutError:
                return "refused (no answer to clear text)"
            if not reply:
                return "refused (closed)"
            return "refused (TLS alert)" if reply[0] == 0x15 else ACCEPTED
    except OSError as exc:
        return _refused(exc)


def nats_clear_text_attempt(address: str, subject: str = ">") -> str:
    """ACCEPTED when a NATS server at `address` answers a clear-text CONNECT, SUB `subject`
    and PING with PONG (what a server without TLS does); else what it did."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3) as sock:
            sock.settimeout(3)
            info = sock.recv(4096)
            sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n'
                         + f"SUB {subject} 1\r\nPING\r\n".encode())
            reply = b""
            with contextlib.suppress(TimeoutError):
                while b"PONG" not in reply and (chunk := sock.recv(4096)):
                    reply += chunk
    except OSError as exc:
        return _refused(exc)
    if b"PONG" in reply:
        return ACCEPTED
    wants_tls = b'"tls_required":true' in info.replace(b" ", b"")
    said = reply.decode(errors="replace").strip()[:60] or "no reply"
    return f"refused ({'server requires TLS; ' if wants_tls else ''}{said})"


def _http_attempt(method: str, url: str, **kwargs) -> str:
    """ACCEPTED when `url` answers 200 to a client without the graph's files (no CA: it
    checks nothing; no client certificate); else what it said."""
    import httpx

    try:
        reply = httpx.request(method, url, verify=False, trust_env=False, timeout=5, **kwargs)
    except httpx.HTTPError as exc:
        return _refused(exc)
    if reply.status_code == 200:
        return ACCEPTED
    return f"refused (HTTP {reply.status_code}: {reply.text.strip()[:60]})"


def etcd_http_attempt(url: str, body: dict) -> str:
    """What etcd's JSON gateway at `url` (e.g. .../v3/kv/range) answers such a client."""
    return _http_attempt("POST", url, json=body)


def frontend_attempt(url: str) -> str:
    """Whether the OpenAI endpoint at `url` (http:// or https://) lists its models to it."""
    return _http_attempt("GET", f"{url}/v1/models")


def tcp_reachable(address: str) -> bool:
    """A TCP connection to `address` is set up: the probes' refusals are not routing."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=3):
            return True
    except OSError:
        return False


def run_attempts(attempts: dict) -> dict:
    """The outcome of each attempt a stranger without the graph's files can make: `tcp`
    (addresses: reachable or not), `nats` ([URL, TLS or not, subject]), `nats_clear`
    (addresses), `etcd_http` ([URL, JSON body]), `request_tls` and `request_plain` (worker
    request addresses), `frontend` (base URLs of the OpenAI endpoint)."""
    return {
        "tcp": {a: tcp_reachable(a) for a in attempts.get("tcp", [])},
        "nats": [asyncio.run(nats_attempt(url, no_verify() if tls else None, subject=subject))
                 for url, tls, subject in attempts.get("nats", [])],
        "nats_clear": {a: nats_clear_text_attempt(a) for a in attempts.get("nats_clear", [])},
        "etcd_http": [etcd_http_attempt(url, body) for url, body in attempts.get("etcd_http", [])],
        "request_tls": {a: request_port_attempt(a, no_verify())
                        for a in attempts.get("request_tls", [])},
        "request_plain": {a: plain_tcp_attempt(a) for a in attempts.get("request_plain", [])},
        "frontend": [frontend_attempt(url) for url in attempts.get("frontend", [])],
    }


if __name__ == "__main__":
    print(json.dumps(run_attempts(json.loads(sys.argv[1]))))
