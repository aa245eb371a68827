"""The stop order across the nodes of a multi-node graph (launch/node_stop.py): each agent
stops its share in `ProcessKind.stop_rank` order, and waits (bounded) for the other nodes'
processes that stop before. Other nodes are their state files' contents; no process starts
here."""

from __future__ import annotations

import threading

from conftest import GRAPHS, single_head_topology
from dis_serve.launch.agent import NodeRunDir, node_launch_plan, runtime_values
from dis_serve.launch.cluster_tls import write_cluster_ca
from dis_serve.launch.node_stop import STOP_WAIT_S, CrossNodeStop, stop_blockers
from dis_serve.launch.status import (
    GraphPhase,
    GraphStatus,
    ProcessState,
    ProcessStatus,
)
from dis_serve.launch.supervisor import Supervisor
from dis_serve.placements.slurm.sbatch import render_slurm_plan
from dis_serve.render.run_layout import ADDRESSES_FILE
from dis_serve.topology import ProcessKind

THREE_NODES = single_head_topology(GRAPHS / "demo-3node-slurm.yaml")
ADDRESSES = "NODE_ADDR_0=198.18.0.11\nNODE_ADDR_1=198.18.0.12\nNODE_ADDR_2=198.18.0.13\n"


def _own_plan(tmp_path, node: str):
    plan = render_slurm_plan(THREE_NODES, run_dir=str(tmp_path))
    (tmp_path / ADDRESSES_FILE).write_text(ADDRESSES)
    write_cluster_ca(THREE_NODES, tmp_path)  # as `up` does: the HTTPS frontend's probes read it
    values = runtime_values(plan, node, tmp_path, environ={}, data_dir=tmp_path / "local")
    return node_launch_plan(plan, node, values, tmp_path, THREE_NODES)[0]


def _status(phase: GraphPhase, **processes: tuple[ProcessKind, ProcessState]) -> GraphStatus:
    return GraphStatus(
        name="g", namespace="g", run_dir="/r", endpoint="http://h:1", model_name="m",
        supervisor_pid=1, supervisor_create_time=0.0, phase=phase, started_at=0.0,
        processes=[ProcessStatus(name=name, kind=kind, state=state)
                   for name, (kind, state) in processes.items()])


class _FakeTime:
    """A clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps = 0

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.sleeps += 1


def test_the_head_stops_balancer_frontend_workers_nats_then_etcd_with_the_real_supervisor(
        tmp_path):
    seen: list[tuple[list[str], dict[str, ProcessState]]] = []
    supervisor = Supervisor(_own_plan(tmp_path, "node0"), NodeRunDir(tmp_path, "node0"),
                            ready_timeout_s=60.0)

    def record(group):
        seen.append(([spec.name for spec in group],
                     {p.name: p.state for p in supervisor.run_dir.read_state().processes}))

    supervisor.before_stopping = record
    supervisor.request_stop()  # before it starts: nothing is spawned, only stopped
    supervisor.run()
    assert [names for names, _ in seen] == [["balancer"], ["frontend"], ["prefill-0"], ["nats"],
                                            ["etcd"]]
    before_nats = seen[3][1]
    assert before_nats["frontend"] is before_nats["prefill-0"] is ProcessState.STOPPED
    assert before_nats["nats"] is before_nats["etcd"] is ProcessState.PENDING
    assert supervisor.run_dir.read_state().phase is GraphPhase.STOPPED


def test_the_head_waits_for_the_other_nodes_workers_before_stopping_nats(tmp_path):
    nats = [p for p in _own_plan(tmp_path, "node0").processes if p.kind is ProcessKind.NATS]
    clock = _FakeTime()
    others = {"node1": _status(GraphPhase.STOPPING,
                               **{"decode-0": (ProcessKind.WORKER, ProcessState.STOPPING)}),
              "node2": _status(GraphPhase.STOPPED,
                               **{"decode-1": (ProcessKind.WORKER, ProcessState.STOPPED)})}
    lines: list[str] = []

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        others["node1"] = _status(GraphPhase.STOPPED,
                                  **{"decode-0": (ProcessKind.WORKER, ProcessState.STOPPED)})

    CrossNodeStop(lambda: others, say=lines.append, clock=lambda: clock.now, sleep=sleep)(nats)
    assert clock.sleeps == 1
    assert lines[0] == "before stopping nats: waiting for decode-0 on node1"


def test_etcd_and_nats_wait_for_workers_of_a_node_that_is_not_stopping():
    group = _own_plan_specs(ProcessKind.ETCD)
    serving = {"node1": _status(GraphPhase.READY,
                                **{"decode-0": (ProcessKind.WORKER, ProcessState.READY)})}
    assert stop_blockers(group, serving) == ["decode-0 on node1"]


def test_a_worker_node_waits_for_the_frontend_only_while_the_head_is_stopping():
    workers = _own_plan_specs(ProcessKind.WORKER)
    frontend = {"frontend": (ProcessKind.FRONTEND, ProcessState.READY)}
    assert stop_blockers(workers, {"node0": _status(GraphPhase.READY, **frontend)}) == []
    assert stop_blockers(workers, {"node0": _status(GraphPhase.STOPPING, **frontend)}) == [
        "frontend on node0"]


def test_a_node_with_no_state_or_stopped_holds_nothing_back():
    group = _own_plan_specs(ProcessKind.ETCD)
    gone = _status(GraphPhase.FAILED, **{"decode-0": (ProcessKind.WORKER, ProcessState.READY)})
    assert stop_blockers(group, {"node1": None, "node2": gone}) == []


def test_a_node_that_never_stops_holds_the_stop_back_for_the_bounded_wait_only(tmp_path):
    group = _own_plan_specs(ProcessKind.NATS)
    stuck = {"node1": _status(GraphPhase.READY,
                              **{"decode-0": (ProcessKind.WORKER, ProcessState.READY)})}
    clock = _FakeTime()
    lines: list[str] = []
    CrossNodeStop(lambda: stuck, say=lines.append, clock=lambda: clock.now,
                  sleep=clock.sleep)(group)
    assert STOP_WAIT_S <= clock.now < STOP_WAIT_S + 1
    assert lines[-1].startswith("stopping nats although decode-0 on node1 still runs")


def _own_plan_specs(kind: ProcessKind):
    plan = render_slurm_plan(THREE_NODES, run_dir="/run")
    return [p for node in plan.nodes for p in node.processes if p.kind is kind][:1]


def test_a_stop_request_from_a_signal_inside_another_ones_event_set_returns_at_once(tmp_path):
    supervisor = Supervisor(_own_plan(tmp_path, "node0"), NodeRunDir(tmp_path, "node0"),
                            ready_timeout_s=60.0)
    supervisor.request_stop()

    def second_signal() -> None:
        # What the first handler holds when the second SIGTERM's handler runs on top of it
        # in the same thread: the event's (non-reentrant) lock, inside Event.set.
        with supervisor._stop._cond:
            supervisor.request_stop()

    handler = threading.Thread(target=second_signal, daemon=True)
    handler.start()
    handler.join(timeout=5)
    assert not handler.is_alive()
    assert supervisor.stop_requested
