"""The client's view of a multi-node graph (placements/cluster/view.py): every node's agent
state and heartbeat folded into one phase. A node that is hung or gone makes the graph
degraded while every role still has a ready process elsewhere, failed when a role has
none left on a live node. Before the graph first served, an agent that is only quiet is a
slow start (named, still starting) until the startup budget; a dead or failed one fails it
at once. No processes are started here."""

from __future__ import annotations

import os
import socket
import time

from conftest import GRAPHS, single_head_topology
from dis_serve.launch.agent_contact import (
    HEARTBEAT_STALE_S,
    Heartbeat,
    _stop_requested_since,
    request_stop,
)
from dis_serve.launch.startup_budget import worker_startup_budget_s
from dis_serve.launch.status import GraphPhase, GraphStatus, ProcessState, ProcessStatus
from dis_serve.placements.cluster.view import NodeLook, fold
from dis_serve.placements.slurm.sbatch import render_slurm_plan

THREE_NODES = single_head_topology(GRAPHS / "demo-3node-slurm.yaml")
PLAN = render_slurm_plan(THREE_NODES, run_dir="/run")  # node0: infra + prefill-0; node1, node2
BUDGET = worker_startup_budget_s(THREE_NODES)  # how long a start may take (120 s, mocker)


def _state(node: str, phase: GraphPhase = GraphPhase.READY,
           states: dict[str, ProcessState] | None = None) -> GraphStatus:
    spec = next(n for n in PLAN.nodes if n.name == node)
    states = states or {}
    return GraphStatus(
        name=PLAN.name, namespace=PLAN.namespace, run_dir="/run", endpoint="http://h:1",
        model_name="m", supervisor_pid=100, supervisor_create_time=1.0, phase=phase,
        started_at=1.0, processes=[ProcessStatus(
            name=p.name, kind=p.kind, pid=200 + i,
            state=states.get(p.name, ProcessState.READY),
            ready=states.get(p.name, ProcessState.READY) is ProcessState.READY)
            for i, p in enumerate(spec.processes)])


def _looks(**overrides) -> list[NodeLook]:
    """Every node ready and heard from a moment ago, unless overridden per node name."""
    looks = []
    for node in PLAN.nodes:
        state, age = overrides.get(node.name, (_state(node.name), 0.5))
        beat = None if age is None else Heartbeat(age_s=age, pid=100, create_time=1.0,
                                                  host="another-machine")
        looks.append(NodeLook(node=node, state=state, heartbeat=beat))
    return looks


def _fold(looks: list[NodeLook], *, served: bool, running: bool = True,
          router_complete: bool = False, router: str | None = None):
    return fold(looks, running=running, served=served, router_complete=router_complete,
                starting_grace_s=BUDGET, router=router)


def _starting(node: str) -> GraphStatus:
    """The node's agent has spawned its workers, which are not ready yet."""
    spec = next(n for n in PLAN.nodes if n.name == node)
    return _state(node, GraphPhase.STARTING,
                  {p.name: ProcessState.STARTING for p in spec.processes})


def test_every_node_ready_and_every_worker_routed_is_ready():
    folded = _fold(_looks(), served=True, router_complete=True)
    assert folded.phase is GraphPhase.READY and folded.problems == []
    assert [(p.name, p.node) for p in folded.processes] == [
        ("etcd", "node0"), ("nats", "node0"), ("frontend", "node0"), ("balancer", "node0"),
        ("prefill-0", "node0"),
        ("decode-0", "node1"), ("decode-1", "node2")]


def test_a_node_not_heard_from_is_degraded_while_another_node_serves_its_role():
    looks = _looks(node2=(_state("node2"), HEARTBEAT_STALE_S + 10))
    folded = _fold(looks, served=True, router="prefill 1/1, decode 1/2")
    assert folded.phase is GraphPhase.DEGRADED
    assert "node node2: its agent was last heard from 16 s ago" in folded.problems[0]
    assert "router: sees prefill 1/1, decode 1/2" in folded.problems
    decode_1 = next(p for p in folded.processes if p.name == "decode-1")
    assert decode_1.state is ProcessState.GONE and not decode_1.ready


def test_a_node_whose_agent_stopped_while_the_job_runs_is_degraded_not_stopped():
    looks = _looks(node1=(_state("node1", GraphPhase.STOPPED,
                                 {"decode-0": ProcessState.STOPPED}), 30.0))
    folded = _fold(looks, served=True)
    assert folded.phase is GraphPhase.DEGRADED
    assert folded.problems[0] == "node node1: its agent has stopped"


def test_a_role_whose_every_process_is_on_gone_nodes_fails_the_graph():
    looks = _looks(node0=(_state("node0"), HEARTBEAT_STALE_S + 1))
    folded = _fold(looks, served=True)
    assert folded.phase is GraphPhase.FAILED


def test_a_process_restarting_on_a_live_node_is_degraded_even_as_its_roles_only_worker():
    looks = _looks(node0=(_state("node0", GraphPhase.DEGRADED,
                                 {"prefill-0": ProcessState.BACKOFF}), 0.5))
    folded = _fold(looks, served=True)
    assert folded.phase is GraphPhase.DEGRADED
    assert "node node0: prefill-0 is backoff" in folded.problems


def test_before_it_served_nodes_not_yet_started_are_starting_and_their_processes_pending():
    looks = _looks(node2=(None, None))
    folded = _fold(looks, served=False)
    assert folded.phase is GraphPhase.STARTING
    assert next(p for p in folded.processes if p.name == "decode-1").state \
        is ProcessState.PENDING


def test_a_node_gone_before_the_graph_served_fails_it_at_once():
    looks = _looks(node1=(_state("node1", GraphPhase.FAILED), 1.0))
    assert _fold(looks, served=False).phase is GraphPhase.FAILED


def test_before_it_served_an_agent_quiet_past_the_heartbeat_is_starting_and_named():
    # A loaded or paused machine silences a healthy agent while its workers start.
    looks = _looks(node1=(_starting("node1"), HEARTBEAT_STALE_S + 4))
    folded = _fold(looks, served=False)
    assert folded.phase is GraphPhase.STARTING
    assert folded.problems == [
        "node node1: its agent has been quiet for 10 s while the graph starts (lost after "
        "120 s, the startup budget)"]
    decode_0 = next(p for p in folded.processes if p.name == "decode-0")
    assert (decode_0.state, decode_0.ready) == (ProcessState.STARTING, False)
    assert decode_0.why == folded.problems[0]


def test_the_same_silence_after_the_graph_served_is_a_lost_node():
    looks = _looks(node1=(_state("node1"), HEARTBEAT_STALE_S + 4))
    folded = _fold(looks, served=True)
    assert folded.phase is GraphPhase.DEGRADED
    assert folded.problems[0].startswith("node node1: its agent was last heard from 10 s ago")
    assert next(p for p in folded.processes if p.name == "decode-0").state \
        is ProcessState.GONE


def test_before_it_served_an_agent_quiet_past_the_startup_budget_fails_the_graph():
    looks = _looks(node1=(_starting("node1"), BUDGET + 1))
    folded = _fold(looks, served=False)
    assert folded.phase is GraphPhase.FAILED
    assert folded.problems[0].startswith("node node1: its agent was last heard from 121 s ago")


def test_before_it_served_a_dead_agent_on_this_machine_fails_the_graph_at_once():
    # Its pid runs another process than the one that wrote the heartbeat: known dead.
    dead = Heartbeat(age_s=1.0, pid=os.getpid(), create_time=1.0, host=socket.gethostname())
    looks = [NodeLook(node=look.node, state=look.state, heartbeat=dead)
             if look.node.name == "node1" else look
             for look in _looks(node1=(_starting("node1"), 1.0))]
    folded = _fold(looks, served=False)
    assert folded.phase is GraphPhase.FAILED
    assert folded.problems[0] == f"node node1: its agent (pid {os.getpid()}) is dead"


def test_a_job_that_ended_shows_every_process_stopped():
    folded = _fold(_looks(), running=False, served=True)
    assert folded.phase is GraphPhase.STOPPED
    assert {p.state for p in folded.processes} == {ProcessState.STOPPED}


def test_an_agent_obeys_only_a_stop_request_written_after_it_started(tmp_path):
    request_stop(tmp_path)
    assert _stop_requested_since(tmp_path, time.time() - 60)
    assert not _stop_requested_since(tmp_path, time.time() + 60)
