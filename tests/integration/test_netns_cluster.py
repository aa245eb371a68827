"""The multi-node test bed itself (tests/netns_cluster.py): three Slurm nodes, each in its own
network namespace on a bridge, addresses from 198.18.0.0/24. What the graph tests on it rely
on: the nodes are idle, a job's steps run inside their node's namespace and see its address,
TCP crosses namespaces, srun offers PMIx."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from netns_cluster import ATTACKER_ADDRESS, BRIDGE_ADDRESS, SLURMD_PORT, in_namespace

pytestmark = pytest.mark.integration
PORT = 18790


def _namespace_inode(namespace: str) -> int:
    return os.stat(f"/var/run/netns/{namespace}").st_ino


def test_three_nodes_are_idle_each_at_its_own_address(netns_cluster):
    out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T %o"], env=netns_cluster.env,
                         capture_output=True, text=True, check=True).stdout
    assert sorted(out.split("\n")[:-1]) == [
        "n1 idle 198.18.0.11", "n2 idle 198.18.0.12", "n3 idle 198.18.0.13"]


def test_a_three_node_job_runs_one_step_in_each_nodes_namespace(netns_cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(textwrap.dedent("""\
        #!/bin/bash
        srun --nodes=3 --ntasks-per-node=1 bash -c \\
          'echo "$SLURMD_NODENAME $(stat -L -c %i /proc/self/ns/net) \\
          $(ip -4 -o addr show dev eth0 | awk "{print \\$4}")"'
        """))
    out = tmp_path / "job.out"
    code, record = netns_cluster.batch("--nodes=3", f"--output={out}", str(script),
                                       timeout_s=60)
    assert code == 0, record + out.read_text()
    seen = {line.split()[0]: line.split()[1:] for line in out.read_text().splitlines()}
    assert seen == {
        f"n{k}": [str(_namespace_inode(netns_cluster.namespace(f"n{k}"))), f"198.18.0.1{k}/24"]
        for k in (1, 2, 3)}


def test_tcp_crosses_from_one_node_to_another_and_from_the_controller(netns_cluster):
    server = netns_cluster.popen_in("n3", ["python3", "-c", textwrap.dedent(f"""\
        import socket
        with socket.create_server(("198.18.0.13", {PORT})) as s:
            print("listening", flush=True)
            for _ in range(2):
                conn, peer = s.accept()
                conn.sendall(peer[0].encode())
                conn.close()
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().strip() == "listening"
        client = (f"import socket; s = socket.create_connection(('198.18.0.13', {PORT}), 5); "
                  "print(s.recv(64).decode())")
        from_n1 = netns_cluster.run_in("n1", "python3", "-c", client)
        assert from_n1.stdout.strip() == "198.18.0.11", from_n1.stderr
        from_root = subprocess.run(["python3", "-c", client], capture_output=True, text=True,
                                   timeout=30, check=False)
        assert from_root.stdout.strip() == BRIDGE_ADDRESS, from_root.stderr
        assert server.wait(timeout=10) == 0
    finally:
        server.kill()
        server.wait()


def test_the_attacker_namespace_reaches_the_nodes_but_is_no_slurm_node(netns_cluster):
    attacker = netns_cluster.attacker
    assert attacker is not None
    addr = subprocess.run(in_namespace(attacker, "ip", "-4", "-o", "addr", "show", "dev",
                                       "eth0"), capture_output=True, text=True, check=True)
    assert f"{ATTACKER_ADDRESS}/24" in addr.stdout
    # n1's slurmd listens on the cluster network, so a stranger on it can connect.
    connect = subprocess.run(in_namespace(attacker, "python3", "-c", (
        f"import socket; socket.create_connection(('198.18.0.11', {SLURMD_PORT}), 5)")),
        capture_output=True, text=True, check=False, timeout=30)
    assert connect.returncode == 0, connect.stderr
    sinfo = subprocess.run(["sinfo", "-h", "-N", "-o", "%o"], env=netns_cluster.env,
                           capture_output=True, text=True, check=True).stdout
    assert ATTACKER_ADDRESS not in sinfo


def test_srun_offers_pmix(netns_cluster):
    out = subprocess.run(["srun", "--mpi=list"], env=netns_cluster.env, capture_output=True,
                         text=True, timeout=30, check=True)
    assert "pmix" in (out.stdout + out.stderr).split()


def test_a_command_run_in_a_node_sees_only_that_nodes_interfaces(netns_cluster):
    out = netns_cluster.run_in("n2", "ip", "-4", "-o", "addr", "show")
    addresses = sorted(line.split()[3] for line in out.stdout.splitlines())
    assert addresses == ["127.0.0.1/8", "198.18.0.12/24"]
    assert Path("/var/run/netns", netns_cluster.namespace("n2")).exists()
