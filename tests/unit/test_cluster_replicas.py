"""A multi-node graph that survives the loss of any one node: services spread from the head
on (etcd and NATS members, frontend replicas each with a balancer, the floating address),
each node's processes pointed at every etcd member and their own NATS member, and the
configurations each node's agent writes for its services. No processes are started."""

from __future__ import annotations

import copy

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.errors import UserInputError
from dis_serve.launch.agent import node_launch_plan, runtime_values
from dis_serve.launch.node_configs import NodeContext, balancer_settings, write_node_configs
from dis_serve.placements.hosts.scripts import render_hosts_plan
from dis_serve.placements.slurm.sbatch import render_slurm_plan
from dis_serve.render.run_layout import ADDRESSES_FILE
from dis_serve.topology import Topology

DATA = yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text())
ADDRESSES = {f"NODE_ADDR_{i}": f"198.18.0.1{i + 1}" for i in range(3)}
VIP = "198.18.0.100"


def _topo(**frontend) -> Topology:
    data = copy.deepcopy(DATA)
    data["frontend"] = frontend
    return Topology.model_validate(data)


def _plans(tmp_path, topo: Topology, node: str):
    plan = render_slurm_plan(topo, run_dir=str(tmp_path))
    (tmp_path / ADDRESSES_FILE).write_text("".join(f"{k}={v}\n" for k, v in ADDRESSES.items()))
    values = runtime_values(plan, node, tmp_path, environ={}, data_dir=tmp_path / node)
    own, whole = node_launch_plan(plan, node, values, tmp_path, topo)
    return plan, values, own, whole


def test_each_of_three_nodes_runs_an_etcd_and_a_nats_member_and_two_run_a_frontend(tmp_path):
    names = {node: [p.name for p in _plans(tmp_path, _topo(), node)[2].processes]
             for node in ("node0", "node1", "node2")}
    assert names == {"node0": ["etcd-0", "nats-0", "frontend-0", "balancer-0", "prefill-0"],
                     "node1": ["etcd-1", "nats-1", "frontend-1", "balancer-1", "decode-0"],
                     "node2": ["etcd-2", "nats-2", "decode-1"]}


def test_every_process_finds_every_etcd_member_and_its_own_nodes_nats(tmp_path):
    own = _plans(tmp_path, _topo(), "node2")[2]
    decode = own.process("decode-1")
    assert decode.env["ETCD_ENDPOINTS"] == ",".join(
        f"https://198.18.0.1{k}:2379" for k in (1, 2, 3))
    assert decode.env["NATS_SERVER"] == "tls://198.18.0.13:4222"


def test_the_etcd_members_bootstrap_one_cluster_with_the_graphs_token(tmp_path):
    etcd = _plans(tmp_path, _topo(), "node1")[2].process("etcd-1")
    cluster = etcd.argv[etcd.argv.index("--initial-cluster") + 1]
    assert cluster == ",".join(f"node{k}=https://198.18.0.1{k + 1}:2380" for k in range(3))
    assert etcd.argv[etcd.argv.index("--name") + 1] == "node1"
    assert etcd.argv[etcd.argv.index("--initial-cluster-token") + 1] == \
        "dis-serve-demo-3node-slurm"


def test_each_replica_runs_the_kv_router_with_replica_sync_on_its_own_address(tmp_path):
    own = _plans(tmp_path, _topo(), "node1")[2]
    frontend = own.process("frontend-1")
    assert "--router-replica-sync" in frontend.argv
    assert frontend.argv[frontend.argv.index("--http-host") + 1] == "198.18.0.12"
    assert frontend.ports == {"replica": 8002}


def test_clients_use_the_floating_address_when_there_is_one_else_the_heads_balancer(
        tmp_path):
    assert _plans(tmp_path, _topo(), "node0")[3].endpoint == "https://198.18.0.11:8000"
    floating = _topo(floating_address={"address": VIP})
    assert _plans(tmp_path, floating, "node0")[3].endpoint == f"https://{VIP}:8000"


def test_a_nats_member_routes_to_every_other_member_over_mutual_tls(tmp_path):
    topo = _topo()
    plan, values, _own, _whole = _plans(tmp_path, topo, "node0")
    write_node_configs(NodeContext.of(topo, plan, plan.nodes[0], values, tmp_path,
                                      tmp_path / "node0"))
    config = (tmp_path / "nats-node0.conf").read_text()
    assert 'server_name: "node0"' in config
    assert 'routes: ["tls://198.18.0.12:6222", "tls://198.18.0.13:6222"]' in config
    assert config.count("verify: true") == 2  # clients and routes


def test_each_balancer_fronts_every_replica_and_binds_the_floating_address(tmp_path):
    topo = _topo(floating_address={"address": VIP})
    plan, values, _own, _whole = _plans(tmp_path, topo, "node1")
    settings = balancer_settings(NodeContext.of(topo, plan, plan.nodes[1], values, tmp_path,
                                                tmp_path / "node1"))
    assert (settings.bind_host, settings.bind_port, settings.floating) == (VIP, 8000, True)
    assert [(r.name, r.host, r.port) for r in settings.replicas] == [
        ("frontend-0", "198.18.0.11", 8001), ("frontend-1", "198.18.0.12", 8002)]


def test_hosts_scripts_of_a_slurm_graph_keep_every_service_on_the_head():
    # Their nodes learn only their own address and the head's (HEAD_ADDRESS, NODE_ADDRESS).
    assert [p.name for p in render_hosts_plan(_topo()).head.processes][:3] == [
        "etcd", "nats", "frontend"]


def test_hosts_scripts_of_a_slurm_graph_refuse_replicas_asked_for():
    with pytest.raises(UserInputError, match=r"frontend\.replicas is above 1") as err:
        render_hosts_plan(_topo(replicas=2))
    assert "placement.hosts" in err.value.fix
