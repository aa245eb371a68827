"""The next step of a change of a running graph (change/steps.py): grow at once, shrink at
once, roll one worker at a time never below the pool's minimum, refuse what the GPUs cannot
hold, with the numbers."""

from __future__ import annotations

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.change.steps import WorkerNow, next_step
from dis_serve.errors import UserInputError
from dis_serve.render.node_layout import WorkerSlot, worker_slots
from dis_serve.topology import PoolRole, Topology


def _demo(**pools) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    for role, settings in pools.items():
        data["pools"][role] |= settings
    return Topology.model_validate(data)


def _running(topo: Topology, stale: tuple[str, ...] = ()) -> list[WorkerNow]:
    return [WorkerNow(slot=s, current=s.name not in stale) for s in worker_slots(topo)]


def test_a_pool_below_its_target_gets_every_missing_worker_at_once_on_free_gpus():
    running = _running(_demo())
    step = next_step(_demo(decode={"workers": 3}), running, reserved_ports=set())
    assert [s.name for s in step.add] == ["decode-1", "decode-2"]
    # GPUs 0 and 1 hold prefill-0 and decode-0; the system ports follow on from theirs.
    assert [s.gpus for s in step.add] == [(2,), (3,)]
    assert [s.port for s in step.add] == [9102, 9103]
    assert step.remove == ()


def test_a_pool_above_its_target_loses_its_newest_workers_at_once():
    running = _running(_demo(decode={"workers": 3}))
    step = next_step(_demo(), running, reserved_ports=set())
    assert step.remove == ("decode-2", "decode-1") and step.add == ()


def test_a_reached_target_is_an_empty_step():
    assert next_step(_demo(), _running(_demo()), reserved_ports=set()).empty


def test_a_roll_starts_the_new_worker_first_where_a_gpu_is_free():
    topo = _demo(decode={"workers": 2})
    step = next_step(topo, _running(topo, stale=("decode-0", "decode-1")), set())
    assert [s.name for s in step.add] == ["decode-2"] and step.remove == ()


def test_after_the_new_worker_serves_the_roll_removes_a_stale_one():
    topo = _demo(decode={"workers": 2})
    running = _running(topo, stale=("decode-0", "decode-1"))
    added = next_step(topo, running, set()).add[0]
    step = next_step(topo, [*running, WorkerNow(slot=added, current=True)], set())
    assert step.remove == ("decode-0",) and step.add == ()


def test_with_no_free_gpu_a_roll_drains_first_but_never_below_the_minimum():
    full = _demo(prefill={"workers": 4}, decode={"workers": 4})  # all 8 GPUs
    step = next_step(full, _running(full, stale=("decode-0",)), set())
    assert step.remove == ("decode-0",) and step.add == ()
    floor = _demo(prefill={"workers": 4}, decode={"workers": 4, "min_workers": 4})
    with pytest.raises(UserInputError, match=r"below pools\.decode\.min_workers 4"):
        next_step(floor, _running(floor, stale=("decode-0",)), set())


def _two_nodes(decode_workers: int) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["hardware"] |= {"gpus_per_node": 4, "nodes": 2}
    data["pools"]["prefill"]["workers"] = 2
    data["pools"]["decode"] |= {"workers": decode_workers, "tensor_parallel": 2}
    return Topology.model_validate(data)


def test_growth_the_free_gpus_cannot_hold_is_refused_with_the_numbers():
    # One prefill worker on each node and a TP2 decode worker on node0: the 4 free GPUs
    # (node0: 1, node1: 3) take one more TP2 worker, not two.
    running = [WorkerNow(slot=WorkerSlot(PoolRole.PREFILL, 0, 0, (0,), 9100), current=True),
               WorkerNow(slot=WorkerSlot(PoolRole.PREFILL, 1, 1, (0,), 9101), current=True),
               WorkerNow(slot=WorkerSlot(PoolRole.DECODE, 0, 0, (2, 3), 9102), current=True)]
    with pytest.raises(UserInputError, match=r"decode needs 2 more workers x 2 GPUs; the "
                                             r"graph's nodes have free GPUs node0: 1 of 4, "
                                             r"node1: 3 of 4"):
        next_step(_two_nodes(3), running, set())


def test_new_workers_that_need_the_gpus_of_leaving_ones_wait_for_them():
    running = _running(_demo(prefill={"workers": 3}, decode={"workers": 5}))  # all 8 GPUs
    step = next_step(_demo(prefill={"workers": 1}, decode={"workers": 7}), running, set())
    assert step.remove == ("prefill-2", "prefill-1") and step.add == ()


def test_new_workers_skip_ports_the_graph_uses_for_other_processes():
    step = next_step(_demo(decode={"workers": 2}), _running(_demo()), reserved_ports={9102})
    assert [s.port for s in step.add] == [9103]
