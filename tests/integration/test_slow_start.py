"""A node that is only slow while the graph starts is not a lost node: on the multi-node
test bed (tests/netns_cluster.py), `dis-serve up` of the 3-node Slurm graph rides out a
pause of every process of node 2 (a frozen machine: its slurmd, its agent, its decode
worker) for longer than the 6 s after which a graph that has served calls a silent node
lost. Meanwhile `status` names the quiet node and says the graph is starting; after SIGCONT
the graph is ready and serves."""

from __future__ import annotations

import json
import signal
import ssl
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import dis_serve_at, single_head_data, wait_until
from dis_serve.launch.agent_contact import HEARTBEAT_STALE_S
from dis_serve.launch.rundir import RunDir
from dis_serve.security.pki_files import TLS_DIR, pki_paths
from relocate import relocate

pytestmark = pytest.mark.integration
BASE = 19140
NAME = "it-slow-start"
PAUSED_NODE, PAUSED_AGENT = "n2", "node1"
PAUSE_S = HEARTBEAT_STALE_S + 2.0


def _decode_started(run_dir: Path) -> bool:
    """The paused node's agent has spawned its worker (what it is doing when paused)."""
    try:
        state = json.loads((run_dir / f"state-{PAUSED_AGENT}.json").read_text())
    except (OSError, ValueError):
        return False
    return any(p.get("pid") for p in state["processes"])


def test_up_rides_out_a_node_paused_while_its_workers_start(netns_cluster, tmp_path):
    topo_file = tmp_path / f"{NAME}.yaml"
    topo_file.write_text(yaml.safe_dump(relocate(single_head_data("demo-3node-slurm.yaml"),
                                                 NAME, BASE)))
    home = tmp_path / "home"
    run = RunDir.for_graph(NAME, home)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return dis_serve_at(home, *args, env=netns_cluster.env)

    seen: dict[str, object] = {}

    def pause_the_node() -> None:
        if not wait_until(lambda: _decode_started(run.path), timeout=120):
            return
        netns_cluster.signal_node(PAUSED_NODE, signal.SIGSTOP)
        try:
            time.sleep(PAUSE_S - 1.0)
            seen["status"] = cli("status", NAME, "--json")
        finally:
            netns_cluster.signal_node(PAUSED_NODE, signal.SIGCONT)
            seen["resumed"] = time.monotonic()

    pauser = threading.Thread(target=pause_the_node)
    pauser.start()
    try:
        up = cli("up", str(topo_file), "--detach")
        pauser.join()
        assert up.returncode == 0, up.stdout + up.stderr
        assert "resumed" in seen, "the node was never paused"
        during = seen["status"]
        print(f"\nstatus while node {PAUSED_AGENT} was paused (exit {during.returncode}):\n"
              f"{during.stdout}")
        observed = json.loads(during.stdout)
        assert observed["phase"] == "starting", observed
        assert any(p.startswith(f"node {PAUSED_AGENT}: its agent has been quiet for")
                   for p in observed["problems"]), observed["problems"]
        endpoint = (run.path / "endpoint").read_text().strip()
        tls = pki_paths(run.path / TLS_DIR)
        reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                           verify=ssl.create_default_context(cafile=tls.ca_cert),
                           json={"model": "demo-model", "max_tokens": 4,
                                 "messages": [{"role": "user", "content": "w1 w2"}]})
        assert reply.status_code == 200, reply.text
    finally:
        pauser.join()
        down = cli("down", NAME)
    assert down.returncode == 0, down.stdout + down.stderr
