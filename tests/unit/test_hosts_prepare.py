"""`dis-serve prepare` of a hosts graph: a complete run directory to copy to the nodes, the
steps printed, and the graph found again by name before any node has started."""

from __future__ import annotations

import json
import os

from conftest import GRAPHS, assert_one_line_error


def test_prepare_writes_every_file_the_nodes_need_and_prints_what_to_run_where(
        run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    result = run_cli("prepare", GRAPHS / "demo-two-hosts.yaml")
    assert result.exit_code == 0, result.stderr
    run = tmp_path / "runs" / "demo-two-hosts"
    for name in ("node-head.sh", "node-workers.sh", "README.md", "cluster-plan.json",
                 "topology.json", "model-card/config.json", "model-card/tokenizer.json",
                 "tls/ca.pem", "tls/nats-token"):
        assert (run / name).is_file(), name
    assert os.access(run / "node-head.sh", os.X_OK)
    assert (run / "tls").stat().st_mode & 0o077 == 0
    assert json.loads((run / "cluster-plan.json").read_text())["name"] == "demo-two-hosts"
    lines = result.stdout.splitlines()
    assert lines[0] == f"prepared {run} (placement hosts; README.md there says the same)"
    assert lines[2] == f"2. on head (127.0.0.2): {run}/node-head.sh (head: etcd, NATS, frontend)"
    assert lines[3] == f"3. on workers (127.0.0.3): {run}/node-workers.sh"
    assert "dis-serve down demo-two-hosts" in lines[4]


def test_a_prepared_graph_no_node_has_started_is_starting_and_down_says_it_is_not_running(
        run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))  # where `down` looks for data
    assert run_cli("prepare", GRAPHS / "demo-two-hosts.yaml").exit_code == 0
    status = run_cli("status", "demo-two-hosts")
    assert status.exit_code == 0, status
    assert "demo-two-hosts: starting (no node agent has started yet)" in status.stdout
    assert "prefill-0" in status.stdout and "workers" in status.stdout
    down = run_cli("down", "demo-two-hosts")
    assert down.exit_code == 0, down
    assert down.stdout.strip() == "demo-two-hosts is not running (no node agent is)"


def test_prepare_refuses_a_graph_that_is_not_placed_on_hosts(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    assert_one_line_error(run_cli("prepare", GRAPHS / "demo-slurm.yaml"),
                          "placement is slurm, not hosts")
