"""Rules the supervisor applies to a launch plan: readiness signals, restart backoff, stop order."""

from __future__ import annotations

from pathlib import Path

import pytest

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.coordination.probes import RouterView, expected_workers
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.supervisor import stop_order
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import ProcessKind, Restart, Topology


def _plan(**update):
    topo = load_model_file(Topology, DEMO_TOPOLOGY)
    data = topo.model_dump(mode="json") | update
    return render_launch_plan(Topology.model_validate(data),
                              RenderContext(run_dir=Path("/run/x")))


def test_backoff_doubles_from_the_base():
    policy = Restart(backoff_base_s=0.5, backoff_cap_s=100)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 4.0]


def test_backoff_is_capped():
    policy = Restart(backoff_base_s=1, backoff_cap_s=30)
    assert policy.delay(6) == 30
    assert policy.delay(10_000) == 30


def test_stop_order_is_balancer_then_frontend_then_workers_then_nats_then_etcd():
    groups = stop_order(_plan().processes)
    assert [[p.name for p in g] for g in groups] == [
        ["balancer"], ["frontend"], ["decode-0", "prefill-0"], ["nats"], ["etcd"]]


def test_router_must_see_every_prefill_and_decode_worker():
    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json")
    data["pools"]["decode"]["workers"] = 3
    plan = _plan(pools=data["pools"])
    assert expected_workers(plan) == {"prefill": 1, "decode": 3}


def test_aggregated_workers_count_under_the_frontends_name_for_them():
    plan = _plan(mode="agg", pools={"agg": {"workers": 2}})
    assert expected_workers(plan) == {"aggregated": 2}


@pytest.mark.parametrize(("seen", "complete"), [
    ({"prefill": 1, "decode": 2}, True),
    ({"prefill": 1, "decode": 1}, False),
    ({"decode": 2}, False),
    ({"prefill": 2, "decode": 3}, True),
])
def test_router_view_is_complete_only_with_every_expected_worker(seen, complete):
    view = RouterView(seen=seen, expected={"prefill": 1, "decode": 2})
    assert view.complete is complete


def test_router_view_names_the_worker_types_it_lacks():
    view = RouterView(seen={"prefill": 1}, expected={"prefill": 1, "decode": 2})
    assert view.missing() == ["decode"]
    assert view.describe() == "prefill 1/1, decode 0/2"


def test_workers_get_the_env_that_makes_their_health_report_ready():
    plan = _plan()
    for spec in plan.processes:
        health = spec.env.get("DYN_SYSTEM_USE_ENDPOINT_HEALTH_STATUS")
        if spec.kind is ProcessKind.WORKER:
            assert health == '["generate"]'
        else:
            assert health is None
