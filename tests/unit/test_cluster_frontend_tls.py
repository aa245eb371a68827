"""The frontend of a multi-node graph (hosts, Slurm) serves HTTPS by default, with the head
node's own certificate (its address, and `frontend.host` where set, as SANs), and every
client of ours reaches it with the graph's CA (and client certificate when the frontend
asks for one). The argv goes through Dynamo 1.6.1's own frontend parser."""

from __future__ import annotations

import argparse
import copy
import ipaddress
import warnings
from pathlib import Path

from cryptography import x509

from conftest import GRAPHS, single_head_topology
from dis_serve.launch.cluster_tls import node_server_names, prepare_node_tls, write_cluster_ca
from dis_serve.launch.preflight import exposure_warnings
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.cluster.view import endpoint_tls_here
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.render.cluster_plan import ClusterContext, render_cluster_plan
from dis_serve.render.shell_words import runtime
from dis_serve.security.pki_files import EndpointTls, node_pki_paths
from dis_serve.topology import ProcessKind, Topology

BASE = single_head_topology(GRAPHS / "demo-3node-slurm.yaml")
ADDRESSES = ["198.18.0.11", "198.18.0.12", "198.18.0.13"]
RUN = runtime("RUN_DIR")


def _topo(**tls) -> Topology:
    data = copy.deepcopy(BASE.model_dump(mode="json", exclude_unset=True))
    data.setdefault("security", {}).setdefault("tls", {}).update(tls)
    return Topology.model_validate(data)


def _plan(topo: Topology, run_dir: str = RUN):
    return render_cluster_plan(topo, ClusterContext(run_dir=run_dir, node_addresses=ADDRESSES))


def _frontend(plan):
    return next(p for p in plan.head.processes if p.kind is ProcessKind.FRONTEND)


def _parsed(argv: list[str]):
    """The frontend's config as Dynamo 1.6.1's own parser reads (and validates) `argv`."""
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args, unknown = parser.parse_known_args(argv)
    assert unknown == []
    config = FrontendConfig.from_cli_args(args)
    config.validate()
    return config


def test_a_multi_node_frontend_serves_https_with_the_head_nodes_certificate():
    plan = _plan(BASE)
    config = _parsed(_frontend(plan).argv[3:])  # python3 -m dynamo.frontend ...
    head = node_pki_paths(f"{RUN}/tls", plan.head.name)
    assert (str(config.tls_cert_path), str(config.tls_key_path)) == (head.server_cert,
                                                                      head.server_key)
    assert config.tls_client_ca_cert_path is None
    assert plan.endpoint == "https://198.18.0.11:8000"
    # Behind the head's balancer (at 8000), at the port after it.
    assert _frontend(plan).readiness.url == "https://198.18.0.11:8001/v1/models/demo-model/ready"
    assert plan.endpoint_tls == EndpointTls(ca_cert=f"{RUN}/tls/ca.pem")


def test_client_certificates_make_the_head_ask_for_one_and_our_clients_present_it():
    plan = _plan(_topo(frontend_client_certs=True))
    config = _parsed(_frontend(plan).argv[3:])
    assert str(config.tls_client_ca_cert_path) == f"{RUN}/tls/ca.pem"
    assert plan.endpoint_tls == EndpointTls(ca_cert=f"{RUN}/tls/ca.pem",
                                            client_cert=f"{RUN}/tls/client.pem",
                                            client_key=f"{RUN}/tls/client-key.pem")
    assert _frontend(plan).readiness.tls == plan.endpoint_tls


def test_https_turned_off_in_words_is_plain_http_and_said_out_loud():
    topo = _topo(frontend=False)
    plan = _plan(topo)
    assert plan.endpoint.startswith("http://") and plan.endpoint_tls is None
    assert "--tls-cert-path" not in _frontend(plan).argv
    assert ("placement slurm: the OpenAI endpoint is reachable from the network, without "
            "authentication") in exposure_warnings(topo)


def test_the_default_https_frontend_adds_no_warning():
    assert not any("OpenAI endpoint" in w for w in exposure_warnings(BASE))


def test_the_head_certificate_also_names_frontend_host_and_the_others_only_their_address():
    topo = Topology.model_validate(BASE.model_dump(mode="json", exclude_unset=True)
                                   | {"frontend": {"host": "198.18.0.99"}})
    assert node_server_names(topo, "198.18.0.11", serves_clients=True) == [
        "198.18.0.11", "198.18.0.99"]
    assert node_server_names(topo, "198.18.0.12", serves_clients=False) == ["198.18.0.12"]
    assert node_server_names(BASE, "198.18.0.11", serves_clients=True) == ["198.18.0.11"]


def test_the_head_agent_signs_a_certificate_its_frontend_host_is_checked_against(tmp_path):
    topo = Topology.model_validate(BASE.model_dump(mode="json", exclude_unset=True)
                                   | {"frontend": {"host": "198.18.0.99"}})
    write_cluster_ca(topo, tmp_path)
    plan = _plan(topo, str(tmp_path))
    prepare_node_tls(topo, plan.head, {}, tmp_path)
    cert = x509.load_pem_x509_certificate(
        Path(node_pki_paths(tmp_path / "tls", plan.head.name).server_cert).read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {ipaddress.ip_address("198.18.0.11"), ipaddress.ip_address("198.18.0.99")} <= set(
        sans.get_values_for_type(x509.IPAddress))


def test_a_client_reads_the_ca_in_the_run_directory_as_it_sees_it(tmp_path):
    run = RunDir(tmp_path / "runs" / "g")
    tls = endpoint_tls_here(run, _plan(_topo(frontend_client_certs=True)))
    assert tls == EndpointTls(ca_cert=f"{run.path}/tls/ca.pem",
                              client_cert=f"{run.path}/tls/client.pem",
                              client_key=f"{run.path}/tls/client-key.pem")


def test_the_hosts_readme_says_how_to_curl_the_endpoint_with_the_ca():
    topo = Topology.model_validate(BASE.model_dump(mode="json", exclude_unset=True) | {
        "placement": {"hosts": {"nodes": [{"name": f"n{k}", "address": a}
                                          for k, a in enumerate(ADDRESSES, 1)]}}})
    readme = render_hosts_files(topo)["README.md"]
    assert "curl -s --cacert ./tls/ca.pem https://198.18.0.11:8000/v1/models" in readme
