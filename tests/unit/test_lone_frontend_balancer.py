"""A lone frontend behind the load balancer (`frontend.balancer`, issue 32): where each listens,
what clients are given, the opt-out, and the rules on its ports. haproxy's own behaviour is in
test_balancer_config.py; a frontend killed under load in tests/integration/
test_frontend_restart.py."""

from __future__ import annotations

import copy
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS
from dis_serve.render.cluster_plan import ClusterContext, render_cluster_plan
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import ProcessKind, Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
THREE_SLURM = yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text())
ADDRESSES = ["198.18.0.11", "198.18.0.12", "198.18.0.13"]


def _topo(base: dict = DEMO, **frontend) -> Topology:
    data = copy.deepcopy(base)
    data["frontend"] = (data.get("frontend") or {}) | frontend
    return Topology.model_validate(data)


def _local(topo: Topology):
    return render_launch_plan(topo, RenderContext(run_dir=Path("/run/x")))


def _kinds(plan) -> list[ProcessKind]:
    return [p.kind for p in plan.processes]


def test_on_one_machine_the_balancer_takes_the_port_and_the_frontend_the_next():
    plan = _local(_topo())
    assert plan.process("balancer").ports == {"http": 8000}
    assert plan.process("frontend").ports == {"replica": 8001}
    assert plan.process("frontend").probed_host == "127.0.0.1"
    assert urlsplit(plan.endpoint).port == 8000


def test_moving_the_port_moves_the_frontend_with_it():
    plan = _local(_topo(port=9000))
    assert (plan.process("balancer").ports, plan.process("frontend").ports) == (
        {"http": 9000}, {"replica": 9001})


def test_a_replica_port_given_is_where_the_frontend_listens():
    assert _local(_topo(replica_port=9500)).process("frontend").ports == {"replica": 9500}


def test_the_balancer_binds_frontend_host_and_the_frontend_stays_on_loopback():
    from dis_serve.launch.preflight import listen_host

    topo = _topo(host="0.0.0.0")
    plan = _local(topo)
    assert listen_host(plan.process("balancer"), topo) == "0.0.0.0"
    assert listen_host(plan.process("frontend"), topo) == "127.0.0.1"


def test_without_the_balancer_the_frontend_listens_at_the_port_itself():
    plan = _local(_topo(balancer=False))
    assert ProcessKind.BALANCER not in _kinds(plan)
    assert plan.process("frontend").ports == {"http": 8000}
    assert urlsplit(plan.endpoint).port == 8000


def test_several_replicas_without_the_balancer_are_refused_naming_both_keys():
    with pytest.raises(ValidationError) as raised:
        _topo(balancer=False, replicas=2)
    assert "frontend.replicas 2 needs the load balancer" in str(raised.value)
    assert "frontend.balancer is false" in str(raised.value)


def test_a_frontend_port_taken_by_etcd_is_named_with_its_default():
    with pytest.raises(ValidationError) as raised:
        _topo(port=2378)  # the frontend would take 2379, etcd's client port
    assert ("port 2379 is used by both frontend replica 0 (frontend.replica_port, unset: "
            "frontend.port + 1) and coordination.etcd.client_port") in str(raised.value)


def test_the_last_port_leaves_no_room_for_the_frontend_behind_it():
    with pytest.raises(ValidationError, match=r"passes 65535; set frontend\.replica_port"):
        _topo(port=65535)


def test_an_unset_replica_port_stays_unset_in_the_rendered_topology():
    topo = _topo(port=9000)
    dumped = topo.model_dump(mode="json")
    assert dumped["frontend"]["replica_port"] is None
    again = Topology.model_validate(dumped)
    assert _local(again) == _local(topo)


def test_a_hosts_or_slurm_graph_of_one_frontend_runs_its_balancer_on_the_head():
    topo = _topo(THREE_SLURM, replicas=1)
    plan = render_cluster_plan(topo, ClusterContext(run_dir="/run/x",
                                                    node_addresses=ADDRESSES))
    balancers = [(n.name, p.ports) for n in plan.nodes for p in n.processes
                 if p.kind is ProcessKind.BALANCER]
    assert balancers == [(plan.head.name, {"http": 8000})]
    frontend = next(p for p in plan.head.processes if p.kind is ProcessKind.FRONTEND)
    assert frontend.ports == {"replica": 8001}
    assert plan.endpoint == "https://198.18.0.11:8000"


def test_a_hosts_or_slurm_graph_without_the_balancer_runs_one_frontend_at_the_port():
    topo = _topo(THREE_SLURM, balancer=False)
    assert topo.frontend_replicas == 1
    plan = render_cluster_plan(topo, ClusterContext(run_dir="/run/x",
                                                    node_addresses=ADDRESSES))
    assert not any(p.kind is ProcessKind.BALANCER for n in plan.nodes for p in n.processes)
    frontend = next(p for p in plan.head.processes if p.kind is ProcessKind.FRONTEND)
    assert frontend.ports == {"http": 8000}


def test_the_routers_view_of_the_workers_is_read_from_the_frontend_not_its_balancer():
    """The balancer holds requests while no frontend can route, which is exactly when the
    supervisor must read which workers a frontend lost (etcd restarted empty)."""
    import httpx

    from dis_serve.coordination.probes import router_view

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(503, json={"namespaces": {}})

    plan = _local(_topo())
    with httpx.Client(transport=httpx.MockTransport(answer)) as client:
        router_view(client, plan)
    assert asked == ["http://127.0.0.1:8001/v1/models/demo-model/ready"]
    assert _local(_topo(balancer=False)).router_url is None  # the endpoint is the frontend
