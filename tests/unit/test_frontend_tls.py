"""HTTPS on the OpenAI endpoint: on by default off loopback, plain HTTP on loopback unless
asked, client certificates when asked; Dynamo's own frontend parser reads the flags, and
every client of ours is handed the graph's CA (and client certificate) by path."""

from __future__ import annotations

import argparse
import ipaddress
import os
import warnings
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from conftest import GRAPHS
from dis_serve.bench.aiperf_tls import CLIENT_CERT_ENV, CLIENT_KEY_ENV, SITE_DIR, aiperf_tls_env
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.shell_script import render_shell_script
from dis_serve.security.certs import issue_graph_pki
from dis_serve.security.host_names import frontend_names
from dis_serve.security.pki_files import EndpointTls
from dis_serve.topology import Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
RUN = Path("/runs/demo")


def _topo(host: str = "127.0.0.1", **tls) -> Topology:
    data = {**DEMO, "frontend": {**DEMO["frontend"], "host": host}}
    if tls:
        data["security"] = {"tls": tls}
    return Topology.model_validate(data)


def _plan(topo: Topology):
    return render_launch_plan(topo, RenderContext(run_dir=RUN))


def _frontend_config(argv: list[str]):
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        args, unknown = parser.parse_known_args(argv[3:])  # after `python -m dynamo.frontend`
    assert unknown == []
    config = FrontendConfig.from_cli_args(args)
    config.validate()
    return config


def test_a_loopback_frontend_stays_plain_http_by_default():
    plan = _plan(_topo())
    assert plan.endpoint == "http://127.0.0.1:8000"
    assert plan.endpoint_tls is None
    assert not any(a.startswith("--tls") for a in plan.process("frontend").argv)
    # A plain-HTTP plan reads as it always did: no TLS key in its JSON.
    assert "endpoint_tls" not in plan.model_dump_json()


def test_off_loopback_the_frontend_serves_https_with_the_graphs_server_certificate():
    plan = _plan(_topo("0.0.0.0"))
    config = _frontend_config(plan.process("frontend").argv)
    assert str(config.tls_cert_path) == f"{RUN}/tls/server.pem"
    assert str(config.tls_key_path) == f"{RUN}/tls/server-key.pem"
    assert config.tls_client_ca_cert_path is None
    assert plan.endpoint == "https://127.0.0.1:8000"
    assert plan.endpoint_tls == EndpointTls(ca_cert=f"{RUN}/tls/ca.pem")
    # Behind the balancer (which binds 0.0.0.0:8000), on loopback at the port after it.
    assert plan.process("frontend").readiness.url == \
        "https://127.0.0.1:8001/v1/models/demo-model/ready"


def test_a_loopback_frontend_serves_https_when_the_topology_asks():
    plan = _plan(_topo(frontend=True))
    assert plan.endpoint.startswith("https://")
    assert "--tls-cert-path" in plan.process("frontend").argv


def test_https_can_be_turned_off_in_words_off_loopback():
    plan = _plan(_topo("0.0.0.0", frontend=False))
    assert plan.endpoint.startswith("http://") and plan.endpoint_tls is None


def test_client_certificates_make_the_frontend_ask_for_one_signed_by_the_graphs_ca():
    plan = _plan(_topo(frontend=True, frontend_client_certs=True))
    config = _frontend_config(plan.process("frontend").argv)
    assert str(config.tls_client_ca_cert_path) == f"{RUN}/tls/ca.pem"
    assert plan.endpoint_tls == EndpointTls(ca_cert=f"{RUN}/tls/ca.pem",
                                            client_cert=f"{RUN}/tls/client.pem",
                                            client_key=f"{RUN}/tls/client-key.pem")


def test_the_users_own_pems_serve_the_frontend_in_files_mode():
    plan = _plan(_topo("0.0.0.0", mode="files", ca_file="/pki/ca.pem",
                       cert_file="/pki/graph.pem", key_file="/pki/graph-key.pem"))
    config = _frontend_config(plan.process("frontend").argv)
    assert (str(config.tls_cert_path), str(config.tls_key_path)) == ("/pki/graph.pem",
                                                                     "/pki/graph-key.pem")
    assert plan.endpoint_tls == EndpointTls(ca_cert="/pki/ca.pem")


def test_no_key_material_only_paths_reach_the_plan():
    text = _plan(_topo(frontend=True, frontend_client_certs=True)).model_dump_json()
    assert "PRIVATE KEY" not in text and "BEGIN CERTIFICATE" not in text


def test_the_hand_run_script_waits_on_the_https_frontend_with_the_ca_and_client_cert():
    script = render_shell_script(_plan(_topo(frontend=True, frontend_client_certs=True)),
                                 ready_timeout_s=120)
    assert (f"curl -fsS -o /dev/null --cacert {RUN}/tls/ca.pem --cert {RUN}/tls/client.pem "
            f"--key {RUN}/tls/client-key.pem "
            "https://127.0.0.1:8001/v1/models/demo-model/ready") in script


def test_the_server_certificate_names_the_address_the_frontend_binds():
    pki = issue_graph_pki("demo", ["127.0.0.1", *frontend_names("10.1.2.3")])
    sans = x509.load_pem_x509_certificate(pki.server_cert).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("10.1.2.3") in sans.get_values_for_type(x509.IPAddress)


def test_a_frontend_on_every_interface_is_named_by_this_machines_addresses_and_host_name():
    import socket

    names = frontend_names("0.0.0.0")
    assert "127.0.0.1" in names and socket.gethostname() in names
    assert not any(name.startswith("fe80") for name in names)


def test_aiperf_trusts_only_the_graphs_ca():
    env = aiperf_tls_env(EndpointTls(ca_cert="/runs/demo/tls/ca.pem"))
    assert env == {"SSL_CERT_FILE": "/runs/demo/tls/ca.pem", "SSL_CERT_DIR": str(SITE_DIR)}
    assert [p.name for p in SITE_DIR.iterdir() if p.suffix == ".pem"] == []


def test_aiperf_presents_the_client_certificate_through_its_start_up_hook(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/src")
    env = aiperf_tls_env(EndpointTls(ca_cert="/t/ca.pem", client_cert="/t/client.pem",
                                     client_key="/t/client-key.pem"))
    assert env[CLIENT_CERT_ENV] == "/t/client.pem" and env[CLIENT_KEY_ENV] == "/t/client-key.pem"
    assert env["PYTHONPATH"] == os.pathsep.join([str(SITE_DIR), "/src"])
    assert (SITE_DIR / "sitecustomize.py").is_file()


def test_plain_http_needs_nothing_in_aiperfs_environment():
    assert aiperf_tls_env(None) == {}


@pytest.mark.parametrize("tls", [None, EndpointTls(ca_cert="/t/ca.pem", client_cert="/t/c.pem",
                                                   client_key="/t/k.pem")])
def test_the_curl_line_up_prints_carries_the_graphs_files(tls):
    from dis_serve.cli.launch_cmds import _curl

    line = _curl("https://127.0.0.1:8000", "m", tls)
    if tls is None:
        assert line.startswith("curl -s https://127.0.0.1:8000/v1/chat/completions")
    else:
        assert line.startswith("curl -s --cacert /t/ca.pem --cert /t/c.pem --key /t/k.pem "
                               "https://127.0.0.1:8000/v1/chat/completions")


def test_bench_uses_the_plans_ca_only_for_https_and_only_where_it_exists(tmp_path):
    from dis_serve.bench.target import tls_for

    plan = render_launch_plan(_topo(frontend=True), RenderContext(run_dir=tmp_path))
    assert tls_for(plan.endpoint, plan) is None  # `up` has not written the CA here
    (tmp_path / "tls").mkdir()
    Path(plan.endpoint_tls.ca_cert).write_text("PEM")
    assert tls_for(plan.endpoint, plan) == plan.endpoint_tls
    assert tls_for(plan.endpoint.replace("https", "http"), plan) is None
