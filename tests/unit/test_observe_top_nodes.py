"""`dis-serve top` on a graph spread over nodes (placements/cluster/layout.py): it finds every
worker at the address its node's agent resolved, the frontend at the head's endpoint with the
graph's client files, and puts the node in each process's row; a hung node is not scraped
and shows as gone, a node whose agent has not started has workers without an address. The
run directory is written as the agents write it; the pages are the recorded ones of
tests/fixtures/dynamo/top. No processes are started here."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from rich.console import Console

from conftest import GRAPHS
from dis_serve.cli.observe_cmds import render_frame
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.agent import node_launch_plan, runtime_values
from dis_serve.launch.agent_contact import HEARTBEAT_STALE_S, heartbeat_file
from dis_serve.launch.rundir import PRIVATE_FILE, RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from dis_serve.observe.frame import GraphScrape, build_frame
from dis_serve.observe.prom_window import parse_page
from dis_serve.placements.lookup import layout_from_run
from dis_serve.placements.slurm.sbatch import render_slurm_plan
from dis_serve.render.run_layout import ADDRESSES_FILE, CLUSTER_PLAN_FILE, ENDPOINT_FILE
from dis_serve.topology import PoolRole, Topology

THREE_NODES = load_model_file(Topology, GRAPHS / "demo-3node-slurm.yaml")
NAME = THREE_NODES.name
ADDRESS = {"node0": "198.18.0.11", "node1": "198.18.0.12", "node2": "198.18.0.13"}
ENDPOINT = "https://198.18.0.11:8000"
PAGES = Path(__file__).resolve().parents[1] / "fixtures" / "dynamo" / "top"
SENT = json.loads((PAGES / "sent.json").read_text())
WINDOW_S = 10.0


def _write(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(PRIVATE_FILE)


def _agent_files(run: RunDir, topo: Topology, plan, node: str, restarts: int) -> None:
    """What node `node`'s agent writes: its resolved plan, its state, its heartbeat."""
    values = runtime_values(plan, node, run.path, environ={}, data_dir=run.path / "local")
    own, _ = node_launch_plan(plan, node, values, run.path, topo)
    _write(run.path / f"plan-{node}.json", own.model_dump_json())
    _write(run.path / f"state-{node}.json", GraphStatus(
        name=NAME, namespace=plan.namespace, run_dir=str(run.path), endpoint=own.endpoint,
        model_name=plan.model_name, supervisor_pid=100, supervisor_create_time=1.0,
        phase=GraphPhase.READY, started_at=1.0,
        processes=[ProcessStatus(name=p.name, kind=p.kind, pid=200 + i,
                                 state=ProcessState.READY, ready=True, restarts=restarts)
                   for i, p in enumerate(own.processes)]).model_dump_json())
    _write(heartbeat_file(run.path, node),
           json.dumps({"pid": 100, "create_time": 1.0, "host": "another-machine"}))


def _cluster_run(root: Path, *, hung: str | None = None, not_started: str | None = None,
                 restarts: int = 0, topo: Topology = THREE_NODES) -> RunDir:
    """A served 3-node Slurm graph's run directory: every node's agent has written its
    files, except `not_started`'s; `hung`'s heartbeat is older than the stale limit."""
    run = RunDir.for_graph(NAME, root)
    run.prepare()
    plan = render_slurm_plan(topo, run_dir=str(run.path))
    _write(run.path / CLUSTER_PLAN_FILE, plan.model_dump_json())
    _write(run.topology_file, topo.model_dump_json())
    _write(run.path / ADDRESSES_FILE, "".join(f"NODE_ADDR_{i}={a}\n"
                                              for i, a in enumerate(ADDRESS.values())))
    for node in plan.nodes:
        if node.name != not_started:
            _agent_files(run, topo, plan, node.name, restarts)
    if hung is not None:
        old = time.time() - HEARTBEAT_STALE_S - 10
        os.utime(heartbeat_file(run.path, hung), (old, old))
    _write(run.path / ENDPOINT_FILE, ENDPOINT + "\n")
    return run


def _scrape(layout, when: str, at_s: float) -> GraphScrape:
    """The recorded pages at the layout's URLs (each decode worker gets the recorded
    decode page): what a scrape of every URL the layout asks for returns."""
    recorded = {"frontend": "frontend", "prefill-0": "prefill-0", "decode-0": "decode-0",
                "decode-1": "decode-0"}
    by_url = {layout.frontend_metrics_url: "frontend",
              **{w.metrics_url: recorded[w.name] for w in layout.workers}}
    return GraphScrape(at_s=at_s, pages={
        url: parse_page((PAGES / when / f"{by_url[url]}.prom").read_text())
        for url in layout.urls})


def _frame(layout):
    return build_frame(layout, _scrape(layout, "before", 0.0),
                       _scrape(layout, "after", WINDOW_S))


def test_every_worker_is_scraped_at_the_address_its_nodes_agent_resolved(tmp_path):
    _cluster_run(tmp_path)
    layout = layout_from_run(NAME, tmp_path)
    assert [(w.name, w.node, w.metrics_url, w.ready) for w in layout.workers] == [
        ("prefill-0", "node0", "http://198.18.0.11:9100/metrics", True),
        ("decode-0", "node1", "http://198.18.0.12:9101/metrics", True),
        ("decode-1", "node2", "http://198.18.0.13:9102/metrics", True)]
    assert layout.pools == [PoolRole.PREFILL, PoolRole.DECODE]
    assert layout.batch_capacity[PoolRole.DECODE] > 0


def test_the_frontend_is_scraped_at_the_heads_endpoint_trusting_the_graphs_ca(tmp_path):
    run = _cluster_run(tmp_path)
    layout = layout_from_run(NAME, tmp_path)
    assert (layout.frontend_metrics_url, layout.frontend_node) == (f"{ENDPOINT}/metrics",
                                                                   "node0")
    tls = layout.frontend_tls
    assert tls is not None and Path(tls.ca_cert) == run.path / "tls" / "ca.pem"
    assert tls.client_cert is None


def test_a_frontend_asking_for_client_certificates_gets_the_graphs(tmp_path):
    data = THREE_NODES.model_dump(mode="json", exclude_unset=True)
    data.setdefault("security", {}).setdefault("tls", {})["frontend_client_certs"] = True
    run = _cluster_run(tmp_path, topo=Topology.model_validate(data))
    tls = layout_from_run(NAME, tmp_path).frontend_tls
    assert tls is not None and tls.client_cert is not None
    assert Path(tls.client_cert).parent == run.path / "tls"


def test_without_a_name_top_watches_the_only_graph_whose_agents_run(tmp_path):
    _cluster_run(tmp_path)
    assert layout_from_run(None, tmp_path).name == NAME


def test_each_process_row_names_its_node_and_carries_its_own_scraped_figures(tmp_path):
    _cluster_run(tmp_path)
    frame = _frame(layout_from_run(NAME, tmp_path))
    assert [(p.name, p.node, p.pool, p.state) for p in frame.processes] == [
        ("frontend", "node0", "frontend", "ready"), ("prefill-0", "node0", "prefill", "ready"),
        ("decode-0", "node1", "decode", "ready"), ("decode-1", "node2", "decode", "ready")]
    for process in frame.processes:
        assert process.requests_per_s == pytest.approx(SENT["requests"] / WINDOW_S)
    decode = next(p for p in frame.pools if p.pool is PoolRole.DECODE)
    assert (decode.workers_ready, decode.workers_total, decode.workers_scraped) == (2, 2, 2)
    assert frame.unreachable == [] and frame.node_problems == []


def test_a_hung_node_is_not_scraped_and_its_worker_shows_gone(tmp_path):
    _cluster_run(tmp_path, hung="node2")
    layout = layout_from_run(NAME, tmp_path)
    assert "http://198.18.0.13:9102/metrics" not in layout.urls
    frame = _frame(layout)
    rows = {p.name: p for p in frame.processes}
    assert (rows["decode-1"].state, rows["decode-1"].requests_per_s) == ("gone", None)
    assert rows["decode-0"].state == "ready"
    decode = next(p for p in frame.pools if p.pool is PoolRole.DECODE)
    assert (decode.workers_ready, decode.workers_scraped) == (1, 1)
    assert decode.requests == SENT["requests"]  # what node1's worker served
    assert len(frame.node_problems) == 1
    assert frame.node_problems[0].startswith("node node2: its agent was last heard from")


def test_a_node_whose_agent_has_not_started_has_workers_without_an_address(tmp_path):
    _cluster_run(tmp_path, not_started="node1")
    layout = layout_from_run(NAME, tmp_path)
    decode_0 = next(w for w in layout.workers if w.name == "decode-0")
    assert (decode_0.metrics_url, decode_0.ready) == (None, None)
    assert len(layout.urls) == 3  # the frontend, prefill-0, decode-1
    rows = {p.name: p.state for p in _frame(layout).processes}
    assert rows["decode-0"] == "not started"


def test_a_worker_that_does_not_answer_is_said_so_in_its_row_and_below(tmp_path):
    _cluster_run(tmp_path)
    layout = layout_from_run(NAME, tmp_path)
    silent = "http://198.18.0.12:9101/metrics"
    before, after = _scrape(layout, "before", 0.0), _scrape(layout, "after", WINDOW_S)
    frame = build_frame(layout, before, GraphScrape(at_s=after.at_s,
                                                    pages=after.pages | {silent: None}))
    assert {p.name: p.state for p in frame.processes}["decode-0"] == "not answering"
    assert frame.unreachable == [silent]


def test_the_drawn_frame_has_a_row_per_process_with_its_node_and_the_gone_node_below(
        tmp_path):
    _cluster_run(tmp_path, hung="node2")
    console = Console(record=True, width=160)
    console.print(render_frame(_frame(layout_from_run(NAME, tmp_path))))
    text = console.export_text()
    rows = {line.split()[0]: line.split()[1:3] for line in text.splitlines()
            if line.split() and line.split()[0] in ("frontend", "prefill-0", "decode-0",
                                                    "decode-1")}
    assert rows == {"frontend": ["node0", "ready"], "prefill-0": ["node0", "ready"],
                    "decode-0": ["node1", "ready"], "decode-1": ["node2", "gone"]}
    assert "node node2: its agent was last heard from" in text
