"""Frontend replicas, the one address in front of them, and etcd members: the topology's
defaults and the rules that refuse what could not run or could not survive a node's loss."""

from __future__ import annotations

import copy

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS, assert_one_line_error
from dis_serve.topology import Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
THREE_SLURM = yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text())
TWO_HOSTS = yaml.safe_load((GRAPHS / "demo-two-hosts.yaml").read_text())


def _topo(base: dict, **sections) -> Topology:
    data = copy.deepcopy(base)
    for key, value in sections.items():
        data[key] = (data.get(key) or {}) | value
    return Topology.model_validate(data)


def _refused(base: dict, **sections) -> str:
    with pytest.raises(ValidationError) as raised:
        _topo(base, **sections)
    return str(raised.value)


def test_a_graph_on_one_machine_has_one_frontend_and_one_etcd_by_default():
    topo = _topo(DEMO)
    assert (topo.frontend_replicas, topo.etcd_members) == (1, 1)


def test_a_three_node_graph_has_two_frontends_and_three_etcd_members_by_default():
    topo = _topo(THREE_SLURM)
    assert (topo.frontend_replicas, topo.etcd_members) == (2, 3)


def test_a_two_node_graph_has_two_frontends_but_one_etcd_member():
    # Two members would stop serving when either is lost: no better than one.
    topo = _topo(TWO_HOSTS)
    assert (topo.frontend_replicas, topo.etcd_members) == (2, 1)


def test_an_external_etcd_has_no_members_to_run():
    topo = _topo(THREE_SLURM, coordination={"etcd": {"mode": "external",
                                                      "url": "http://10.0.0.9:2379"}})
    assert topo.etcd_members == 0


def test_one_machine_may_run_several_frontends():
    assert _topo(DEMO, frontend={"replicas": 2}).frontend_replicas == 2


def test_more_replicas_than_nodes_are_refused_naming_the_node_count():
    message = _refused(THREE_SLURM, frontend={"replicas": 4})
    assert "frontend.replicas 4 is more than the graph's 3 nodes" in message
    assert "set frontend.replicas to 3 or fewer" in message


def test_an_even_number_of_etcd_members_is_refused():
    message = _refused(THREE_SLURM, coordination={"etcd": {"members": 2}})
    assert "coordination.etcd.members 2 is even" in message


def test_more_etcd_members_than_nodes_are_refused():
    message = _refused(TWO_HOSTS, coordination={"etcd": {"members": 3}})
    assert "coordination.etcd.members 3 needs 3 nodes" in message


def test_an_etcd_cluster_on_one_machine_is_refused():
    assert "set members: 1" in _refused(DEMO, coordination={"etcd": {"members": 3}})


def test_a_floating_address_needs_several_nodes():
    message = _refused(DEMO, frontend={"replicas": 2,
                                       "floating_address": {"address": "10.0.0.100"}})
    assert "frontend.floating_address is for hosts and Slurm graphs" in message


def test_a_floating_address_needs_two_replicas():
    message = _refused(THREE_SLURM, frontend={"replicas": 1,
                                              "floating_address": {"address": "10.0.0.100"}})
    assert "frontend.replicas is 1" in message


def test_a_floating_address_must_not_be_a_nodes_own():
    node = TWO_HOSTS["placement"]["hosts"]["nodes"][1]["address"]
    message = _refused(TWO_HOSTS, frontend={"floating_address": {"address": node}})
    assert f"frontend.floating_address.address {node} is a node's own address" in message


def test_a_floating_address_must_be_ipv4():
    message = _refused(THREE_SLURM, frontend={"floating_address": {"address": "vip.example"}})
    assert "is not an IPv4 address" in message


def test_a_floating_address_and_a_site_balancer_exclude_each_other():
    message = _refused(THREE_SLURM, frontend={
        "floating_address": {"address": "10.0.0.100"},
        "balancer_url": "https://serving.example.org:8443"})
    assert "keep one" in message


def test_a_site_balancer_url_is_a_base_url():
    message = _refused(THREE_SLURM, frontend={"balancer_url": "serving.example.org/v1"})
    assert "frontend.balancer_url" in message and "is not a base URL" in message


def test_replica_ports_may_not_collide_with_another_port():
    message = _refused(DEMO, frontend={"replicas": 2, "replica_port": 2378})
    assert ("port 2379 is used by both frontend replica 1 (frontend.replica_port + 1) and "
            "coordination.etcd.client_port") in message


def test_validate_names_the_key_of_a_replica_problem_in_one_line(run_cli, tmp_path):
    data = copy.deepcopy(THREE_SLURM)
    data["frontend"] = {"replicas": 5}
    path = tmp_path / "too-many.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_one_line_error(run_cli("validate", path), "frontend.replicas 5")
