"""From a machine on the cluster network that holds none of the graph's files (the test bed's
attacker namespace at 198.18.0.200, on the same bridge as the nodes), every attempt on a
running three-node graph's etcd, NATS, request plane and frontend is refused, and the graph
serves (HTTPS, checked against its CA) before and after: on the Slurm target (`dis-serve
up`) and on the hosts target (its node scripts, each in its node's namespace). Each refusal
is set against the same attempt made with the graph's files, which succeeds, and against a
plain TCP connection from the attacker, which is set up: what stops the attacker is
authentication, not routing.

The Slurm graph keeps every default (its NATS token is the one dis-serve makes; its frontend
HTTPS without client certificates: plain HTTP is refused); the hosts graph takes its NATS
token from the environment, as `coordination.nats.auth` allows, and its frontend asks for
the graph's client certificate (`security.tls.frontend_client_certs`): HTTPS without one is
refused too.

Each test prints its attacker table (attempt, plane, target, result); `pytest -s` shows it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import secrets
import signal
import ssl
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import single_head_data, wait_until
from dis_serve.coordination.etcd_view import read_etcd
from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.launch.model_card import write_model_card
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.security.pki_files import TLS_DIR, pki_paths
from dis_serve.topology import PoolRole, Topology
from netns_cluster import ATTACKER_ADDRESS, NetnsCluster, in_namespace
from plane_probes import ACCEPTED, etcdctl, nats_attempt, request_port_attempt, with_client_cert
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
PROBES = str(Path(__file__).resolve().parents[1] / "plane_probes.py")
HEAD = "198.18.0.11"
NODES = ("n1", "n2", "n3")
TOKEN_ENV = "IT_ATTACK_NATS_TOKEN"
SLURM_BASE, HOSTS_BASE = 18800, 18850


def _data(name: str, base: int, *, token_env: bool, client_certs: bool = False) -> dict:
    """The demo-3node graph on its own ports; with `token_env`, NATS's token from the
    environment (else the one dis-serve makes: the default); with `client_certs`, a frontend
    that asks for the graph's client certificate."""
    data = relocate(single_head_data("demo-3node-slurm.yaml"), name, base)
    if token_env:
        data["coordination"]["nats"]["auth"] = {"token_env": TOKEN_ENV}
    if client_certs:
        data.setdefault("security", {}).setdefault("tls", {})["frontend_client_certs"] = True
    return data


def _graphs_context(run_dir: Path, client_certs: bool) -> ssl.SSLContext:
    """What the graph's own clients hold: its CA, and its client certificate when asked."""
    tls = pki_paths(run_dir / TLS_DIR)
    context = ssl.create_default_context(cafile=tls.ca_cert)
    if client_certs:
        context.load_cert_chain(tls.client_cert, tls.client_key)
    return context


def _chat(endpoint: str, context: ssl.SSLContext) -> bool:
    """A chat over HTTPS, the frontend's certificate checked against the graph's CA (the
    head's address in its SANs)."""
    assert endpoint.startswith("https://"), endpoint
    reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                       verify=context,
                       json={"model": "demo-model", "max_tokens": 8,
                             "messages": [{"role": "user", "content": "w3 w4 w5"}]})
    return reply.status_code == 200 and reply.json()["usage"]["completion_tokens"] == 8


def _reason(result: subprocess.CompletedProcess) -> str:
    if result.returncode == 0:
        return ACCEPTED
    lines = [line for line in result.stderr.splitlines() if line.strip()] or ["no output"]
    return f"refused (exit {result.returncode}: {lines[-1].strip()[:90]})"


class Attack:
    """Every attempt of the attacker on one running graph, and the same made with its files."""

    def __init__(self, cluster: NetnsCluster, run_dir: Path, topo: Topology, token: str):
        self.cluster, self.topo, self.token = cluster, topo, token
        self.tls = pki_paths(run_dir / TLS_DIR)
        self.ours = ("--cacert", self.tls.ca_cert, "--cert", self.tls.client_cert,
                     "--key", self.tls.client_key)
        coord = topo.coordination
        self.etcd = f"{HEAD}:{coord.etcd.client_port}"
        self.nats = f"{HEAD}:{coord.nats.port}"
        self.frontend = f"{HEAD}:{topo.frontend.port}"
        self.client_certs = topo.security.tls.frontend_client_certs
        self.rows: list[tuple[str, str, str, str]] = []

    def _etcd_value(self, key: str) -> str:
        got = etcdctl(f"https://{self.etcd}", *self.ours, command=("get", key))
        assert got.returncode == 0, got.stderr
        return got.stdout

    def _workers(self) -> list[str]:
        view = asyncio.run(read_etcd(f"https://{self.etcd}", self.topo.namespace, self.tls))
        return sorted({r.address for r in view.registrations if r.address})

    def run(self) -> None:
        keys = etcdctl(f"https://{self.etcd}", *self.ours,
                       command=("get", "--prefix", "v1/", "--keys-only")).stdout.split()
        # A decode worker's registration: deleting it would stop the graph serving.
        victim = next(k for k in keys if k.startswith(
            f"v1/instances/{self.topo.namespace}/{PoolRole.DECODE.dynamo_component}/"))
        before, workers = self._etcd_value(victim), self._workers()
        assert len(workers) == 3, workers
        self._etcd_attempts(victim)
        self._network_attempts(workers)
        # Nothing the attacker tried changed the graph's keys; the graph's own files work.
        assert self._etcd_value(victim) == before
        assert self._workers() == workers
        self._with_the_graphs_files(workers)
        self._no_secret_in_any_command_line()

    def _no_secret_in_any_command_line(self) -> None:
        """/proc/PID/cmdline is world-readable on every node: no token, no key in it."""
        for node in NODES:
            for pid in self.cluster.processes_in(node):
                with contextlib.suppress(OSError):
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                    assert self.token.encode() not in cmdline, (node, cmdline)
                    assert b"PRIVATE KEY" not in cmdline, (node, cmdline)

    def _etcd_attempts(self, victim: str) -> None:
        attacker = tuple(in_namespace(self.cluster.attacker))
        attempts = [(f"etcdctl {verb}, {how}", endpoint, flags, command)
                    for how, endpoint, flags in (
                        ("TLS, no client certificate", f"https://{self.etcd}",
                         ("--insecure-skip-tls-verify",)),
                        ("plain HTTP", f"http://{self.etcd}", ()))
                    for verb, command in (("get --prefix v1/", ("get", "--prefix", "v1/")),
                                          (f"put {victim}", ("put", victim, '{"fake": 1}')),
                                          (f"del {victim}", ("del", victim)))]
        def outcome(attempt: tuple) -> str:
            _what, endpoint, flags, command = attempt
            return _reason(etcdctl(endpoint, *flags, command=command, prefix=attacker))

        # All at once: each refusal takes etcdctl's whole 3 s command timeout.
        with ThreadPoolExecutor(len(attempts)) as pool:
            results = list(pool.map(outcome, attempts))
        for (what, endpoint, _flags, _command), result in zip(attempts, results, strict=True):
            self.rows.append((what, "etcd", endpoint, result))
            assert result != ACCEPTED, self.rows[-1]

    def _network_attempts(self, workers: list[str]) -> None:
        # etcd's JSON gateway, as curl would use it: read everything, delete everything.
        everything = {"key": base64.b64encode(b"v1/").decode(),
                      "range_end": base64.b64encode(b"v10").decode()}
        gateway = [[f"{scheme}://{self.etcd}/v3/kv/{verb}", everything]
                   for scheme in ("https", "http") for verb in ("range", "deleterange")]
        # The frontend: plain HTTP; HTTPS without a client certificate where one is asked for
        # (without client certificates HTTPS is open to anyone who reaches it, by design).
        frontend = [f"http://{self.frontend}"] + (
            [f"https://{self.frontend}"] if self.client_certs else [])
        attempts = {"tcp": [self.etcd, self.nats, self.frontend, *workers],
                    "etcd_http": gateway,
                    "nats_clear": [self.nats],
                    "nats": [[f"tls://{self.nats}", True, None],
                             [f"tls://{self.nats}", True, ">"]],
                    "request_tls": workers, "request_plain": workers, "frontend": frontend}
        out = subprocess.run(in_namespace(self.cluster.attacker, sys.executable, PROBES,
                                          json.dumps(attempts)),
                             capture_output=True, text=True, timeout=120, check=True)
        found = json.loads(out.stdout)
        assert all(found["tcp"].values()), found["tcp"]  # it reaches every port
        for (url, _), result in zip(gateway, found["etcd_http"], strict=True):
            verb = url.rsplit("/", 1)[1]
            how = "TLS, no client certificate" if url.startswith("https") else "plain HTTP"
            self.rows.append((f"POST /v3/kv/{verb} of v1/..., {how}", "etcd", url, result))
        self.rows.append(("NATS CONNECT, SUB >, PING in clear text, no token", "NATS",
                          self.nats, found["nats_clear"][self.nats]))
        for (url, _, subject), result in zip(attempts["nats"], found["nats"], strict=True):
            what = ("NATS connect, TLS, no client certificate, no token"
                    + (f", subscribe {subject}" if subject else ""))
            self.rows.append((what, "NATS", url, result))
        for worker in workers:
            self.rows.append(("TLS to a worker's request port, no client certificate",
                              "request (TCP)", worker, found["request_tls"][worker]))
            self.rows.append(("clear-text bytes to a worker's request port",
                              "request (TCP)", worker, found["request_plain"][worker]))
        for url, result in zip(frontend, found["frontend"], strict=True):
            how = ("HTTPS, no client certificate" if url.startswith("https")
                   else "plain HTTP")
            self.rows.append((f"GET /v1/models, {how}", "frontend", url, result))
        assert not [row for row in self.rows if row[3] == ACCEPTED], self.rows

    def _with_the_graphs_files(self, workers: list[str]) -> None:
        ours = with_client_cert(self.tls.ca_cert, self.tls.client_cert, self.tls.client_key)
        url = f"tls://{self.nats}"
        assert asyncio.run(nats_attempt(url, ours, self.token, ">")) == ACCEPTED
        # The token is asked for even of a client with the graph's certificate.
        without_token = asyncio.run(nats_attempt(url, ours, None))
        self.rows.append(("NATS connect, the graph's client certificate, no token",
                          "NATS", url, without_token))
        assert without_token != ACCEPTED
        for worker in workers:
            assert request_port_attempt(worker, ours) == ACCEPTED, worker

    def table(self) -> str:
        lines = ["| attempt | plane | target | result |", "|---|---|---|---|"]
        lines += [f"| {' | '.join(row)} |" for row in self.rows]
        return "\n".join(lines)


def _graph_processes(cluster: NetnsCluster, node: str) -> list[str]:
    found = []
    for pid in cluster.processes_in(node):
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            line = " ".join(proc.cmdline())
            if proc.status() != psutil.STATUS_ZOMBIE and (
                    "dynamo." in line or "etcd" in line or "nats-server" in line
                    or "dis_serve agent" in line):
                found.append(line)
    return found


def test_a_slurm_graph_refuses_every_attempt_from_a_node_without_its_files(
        netns_cluster, tmp_path):
    data = _data("it-attack-slurm", SLURM_BASE, token_env=False)  # every default
    topo_file = tmp_path / "it-attack-slurm.yaml"
    topo_file.write_text(yaml.safe_dump(data))
    env = netns_cluster.env | {"DIS_SERVE_HOME": str(tmp_path / "home")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True,
                              timeout=240, env=env, check=False)

    up = cli("up", str(topo_file), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    run = RunDir.for_graph("it-attack-slurm", tmp_path / "home")
    try:
        assert wait_until((run.path / "endpoint").is_file, timeout=30)
        endpoint = (run.path / "endpoint").read_text().strip()
        ours = _graphs_context(run.path, client_certs=False)
        assert _chat(endpoint, ours)
        token = (run.path / TLS_DIR / "nats-token").read_text().strip()
        attack = Attack(netns_cluster, run.path, Topology.model_validate(data), token)
        attack.run()
        print(f"\nSlurm target, attacker at {ATTACKER_ADDRESS}:\n{attack.table()}")
        assert _chat(endpoint, ours)
        # Our own client sees the router over HTTPS with the graph's CA.
        status = cli("status", "it-attack-slurm")
        assert status.returncode == 0 and "decode 2/2" in status.stdout, status.stdout
    finally:
        down = cli("down", "it-attack-slurm")
    assert down.returncode == 0, down.stdout + down.stderr
    for node in NODES:
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n), timeout=15)


def test_a_hosts_graph_refuses_every_attempt_from_a_node_without_its_files(
        netns_cluster, tmp_path):
    token = secrets.token_urlsafe(24)
    data = _data("it-attack-hosts", HOSTS_BASE, token_env=True, client_certs=True)
    data["placement"] = {"hosts": {"nodes": [
        {"name": name, "address": f"198.18.0.1{k}"} for k, name in enumerate(NODES, 1)]}}
    topo = Topology.model_validate(data)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    for name, text in render_hosts_files(topo).items():
        (run_dir / name).write_text(text)
    write_cluster_ca(topo, run_dir)
    write_model_card(run_dir / "model-card", topo.model.resolved_architecture(),
                     name=topo.model.id)
    env = os.environ | {"DIS_SERVE_RUN_DIR": str(run_dir), TOKEN_ENV: token,
                        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    scripts = netns_cluster.start_hosts_scripts(run_dir, NODES, env)
    try:
        assert wait_until((run_dir / "endpoint").is_file, timeout=90), \
            (run_dir / "node-n1.out").read_text()[-2000:]
        endpoint = (run_dir / "endpoint").read_text().strip()
        ours = _graphs_context(run_dir, client_certs=True)
        assert _chat(endpoint, ours)
        attack = Attack(netns_cluster, run_dir, topo, token)
        attack.run()
        print(f"\nhosts target, attacker at {ATTACKER_ADDRESS}:\n{attack.table()}")
        assert _chat(endpoint, ours)
        assert all(scripts[node].poll() is None for node in NODES)
    finally:
        for node in ("n3", "n2", "n1"):
            scripts[node].send_signal(signal.SIGTERM)
            scripts[node].wait(timeout=30)
    for node in NODES:
        assert wait_until(lambda n=node: not _graph_processes(netns_cluster, n), timeout=15)
