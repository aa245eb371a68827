"""A planned graph, emitted for the mocker, comes up and answers a completion."""

from __future__ import annotations

import httpx
import pytest

from dis_serve.plan.emit import plan_topology
from dis_serve.plan.mocker_profile import profile_tables, write_profile
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.request import build_request
from dis_serve.topology import Mode, Topology

# Below 32768, where this machine's outgoing connections take their ports (Linux's
# ip_local_port_range starts there: a full test run found the old 38400 taken by one), and
# Dynamo reads DYN_SYSTEM_PORT as a signed 16-bit number, so the workers' system ports
# must stay there too.
PORTS = {"frontend": 31900, "etcd_client": 31901, "etcd_peer": 31902, "nats": 31903,
         "frontend_behind_balancer": 31904, "system_base": 32400}


def on_test_ports(topo: Topology) -> Topology:
    data = topo.model_dump(mode="json", exclude_unset=True)
    data["frontend"] = {"host": "127.0.0.1", "port": PORTS["frontend"],
                        "replica_port": PORTS["frontend_behind_balancer"]}
    data["coordination"] = {"etcd": {"client_port": PORTS["etcd_client"],
                                     "peer_port": PORTS["etcd_peer"]},
                            "nats": {"port": PORTS["nats"]}}
    data["observability"] = {"system_port_base": PORTS["system_base"]}
    return Topology.model_validate(data)


@pytest.mark.integration
def test_the_planned_disaggregated_mock_graph_serves_a_completion(tmp_path):
    from dis_serve.launch.graph import start_graph

    # Long prompts on a few GPUs: the best disaggregated shape is small enough for 2 cores.
    request = build_request(model="llama-3.1-8b", isl=4000, osl=100, budget=4,
                            ttft_ms=1500.0, itl_ms=50.0)
    result = make_plan(request)
    plan = result.best_disagg
    assert plan is not None and plan.mode is Mode.DISAGG
    profile = write_profile(profile_tables(result.model, plan, result.workload.isl,
                                           result.space.seq_len), tmp_path / "profile.npz")
    topo = on_test_ports(plan_topology(plan, request, result.workload, mock=True,
                                       profile=profile))
    with start_graph(topo, run_root=tmp_path / "runs", ready_timeout_s=120) as graph:
        reply = httpx.post(f"{graph.endpoint}/v1/chat/completions", timeout=60, json={
            "model": graph.model_name, "max_tokens": 8,
            "messages": [{"role": "user", "content": "w3 w4 w5 w6"}]})
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["content"]
