"""A multi-node graph's TLS (`tls.mode: auto`): the CA made before the nodes start, each
node's server certificate made by its agent for the address it has, the head's NATS config,
and nothing secret in the plan the nodes read."""

from __future__ import annotations

import copy
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from conftest import GRAPHS, single_head_topology
from dis_serve.errors import UserInputError
from dis_serve.launch.cluster_tls import prepare_node_tls, write_cluster_ca
from dis_serve.launch.node_configs import NodeContext, write_node_configs
from dis_serve.render.cluster_plan import ClusterContext, render_cluster_plan
from dis_serve.render.launch_plan import NATS_TOKEN_ENV
from dis_serve.render.shell_words import runtime
from dis_serve.render.tls_planes import ETCD_CLIENT_PEM_ENV
from dis_serve.security.pki_files import node_pki_paths, pki_paths
from dis_serve.topology import ProcessKind, Topology

THREE_NODES = single_head_topology(GRAPHS / "demo-3node-slurm.yaml")
ADDRESSES = ["198.18.0.11", "198.18.0.12", "198.18.0.13"]


def _plan(run_dir: Path, topo: Topology = THREE_NODES):
    return render_cluster_plan(topo, ClusterContext(run_dir=str(run_dir),
                                                    node_addresses=ADDRESSES))


def _cert(path: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(Path(path).read_bytes())


def _verify(tls_dir: Path, node: str, address: str) -> None:
    verifier = (PolicyBuilder().store(Store([_cert(pki_paths(tls_dir).ca_cert)]))
                .build_server_verifier(x509.IPAddress(ipaddress.ip_address(address))))
    verifier.verify(_cert(node_pki_paths(tls_dir, node).server_cert), [])


def _every_node_prepared(run_dir: Path):
    """The graph's CA, then each node's agent's own files, as a started graph has them."""
    write_cluster_ca(THREE_NODES, run_dir)
    plan = _plan(run_dir)
    for node in plan.nodes:
        prepare_node_tls(THREE_NODES, node, {}, run_dir)
    return plan


def test_each_nodes_agent_signs_a_server_certificate_for_its_own_address(tmp_path):
    plan = _every_node_prepared(tmp_path)
    tls = tmp_path / "tls"
    for node, address in zip(plan.nodes, ADDRESSES, strict=True):
        _verify(tls, node.name, address)
    with pytest.raises(VerificationError):  # node1's certificate is not node2's
        _verify(tls, plan.nodes[1].name, ADDRESSES[2])


def test_an_address_known_only_on_the_node_is_resolved_before_it_is_signed(tmp_path):
    write_cluster_ca(THREE_NODES, tmp_path)
    # The plan names run-time variables; the agent signs what they resolve to.
    plan = render_cluster_plan(THREE_NODES, ClusterContext(
        run_dir=str(tmp_path), node_addresses=[runtime(f"A{i}") for i in range(3)]))
    prepare_node_tls(THREE_NODES, plan.nodes[2], {"A2": "10.1.2.3"}, tmp_path)
    _verify(tmp_path / "tls", plan.nodes[2].name, "10.1.2.3")


def test_the_keys_are_0600_in_0700_directories_and_never_in_the_plan(tmp_path):
    plan = _every_node_prepared(tmp_path)
    tls = tmp_path / "tls"
    for path in [tls, *tls.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    assert "PRIVATE KEY" not in plan.model_dump_json()
    assert (tls / "nats-token").read_text().strip() not in plan.model_dump_json()


def test_the_head_writes_the_nats_config_with_its_own_certificate_and_a_token_reference(
        tmp_path):
    write_cluster_ca(THREE_NODES, tmp_path)
    plan = _plan(tmp_path)
    head = plan.head
    secrets = prepare_node_tls(THREE_NODES, head, {}, tmp_path)
    write_node_configs(NodeContext.of(THREE_NODES, plan, head, {}, tmp_path, tmp_path / "data"))
    config = (tmp_path / "nats.conf").read_text()
    assert "verify: true" in config and f"tls/node-{head.name}/server.pem" in config
    assert f"token: ${NATS_TOKEN_ENV}" in config
    token = (tmp_path / "tls" / "nats-token").read_text().strip()
    assert token not in config
    # The token and etcd's client PEMs reach the processes through their environment only.
    assert secrets.env_for(ProcessKind.NATS) == {NATS_TOKEN_ENV: f'"{token}"'}
    assert secrets.env_for(ProcessKind.WORKER)[NATS_TOKEN_ENV] == token
    assert set(ETCD_CLIENT_PEM_ENV) <= set(secrets.env_for(ProcessKind.WORKER))


def test_a_node_whose_run_directory_lacks_the_ca_is_told_where_it_comes_from(tmp_path):
    node = _plan(tmp_path).nodes[1]
    with pytest.raises(UserInputError, match=r"ca\.pem is missing") as caught:
        prepare_node_tls(THREE_NODES, node, {}, tmp_path)
    assert "copy its tls/ directory" in str(caught.value.fix)


def test_every_process_of_a_node_uses_that_nodes_certificate_and_the_graphs_ca(tmp_path):
    plan = _plan(tmp_path)
    for node in plan.nodes:
        for spec in node.processes:
            if spec.kind in (ProcessKind.FRONTEND, ProcessKind.WORKER):
                assert spec.env["DYN_TCP_TLS_CERT_PATH"] == \
                    f"{tmp_path}/tls/node-{node.name}/server.pem"
                assert spec.env["DYN_TCP_TLS_CA_CERT_PATH"] == f"{tmp_path}/tls/ca.pem"
                assert spec.env["NATS_SERVER"].startswith("tls://198.18.0.11:")
    etcd = next(p for p in plan.head.processes if p.kind is ProcessKind.ETCD)
    assert "--client-cert-auth" in etcd.argv and "--peer-client-cert-auth" in etcd.argv


def test_tls_off_in_words_leaves_the_planes_plain_and_makes_no_ca(tmp_path):
    data = copy.deepcopy(THREE_NODES.model_dump(mode="json", exclude_unset=True))
    data["security"] = {"tls": {"mode": "off"}, "insecure_network": True}
    topo = Topology.model_validate(data)
    write_cluster_ca(topo, tmp_path)
    assert not (tmp_path / "tls").exists()
    plan = _plan(tmp_path, topo)
    worker = next(p for n in plan.nodes for p in n.processes if p.kind is ProcessKind.WORKER)
    assert worker.env["ETCD_ENDPOINTS"].startswith("http://")
    assert not any(k.startswith("DYN_TCP_TLS") for k in worker.env)
    assert prepare_node_tls(topo, plan.nodes[1], {}, tmp_path).env_for(
        ProcessKind.WORKER) == {}
