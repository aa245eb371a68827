"""The topology's `security` section: secure by default, and a graph that would listen off
loopback without TLS is refused by `validate` unless the topology says so in words."""

from __future__ import annotations

import pytest
import yaml

from conftest import GRAPHS, assert_one_line_error, topology_variant
from dis_serve.launch.preflight import exposure_warnings
from dis_serve.topology import Topology
from dis_serve.topology.security import TlsMode

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
TWO_HOSTS = yaml.safe_load((GRAPHS / "demo-two-hosts.yaml").read_text())
SLURM = yaml.safe_load((GRAPHS / "demo-slurm.yaml").read_text())


def _file(tmp_path, base: dict, **changes) -> str:
    path = tmp_path / "topology.yaml"
    path.write_text(topology_variant(base, **changes))
    return str(path)


def test_tls_is_on_by_default():
    topo = Topology.model_validate(DEMO)
    assert topo.security.tls.mode is TlsMode.AUTO
    assert topo.security.insecure_network is False


@pytest.mark.parametrize(("base", "because"), [
    (TWO_HOSTS, "placement hosts"), (SLURM, "placement slurm"),
    (DEMO, "frontend.host 0.0.0.0")])
def test_a_graph_off_loopback_without_tls_is_refused_naming_the_key_and_fix(
        run_cli, tmp_path, base, because):
    changes = {"security__tls__mode": "off"}
    if base is DEMO:
        changes["frontend__host"] = "0.0.0.0"
    result = run_cli("validate", _file(tmp_path, base, **changes))
    assert_one_line_error(result, "security.tls.mode is off", because,
                          "security.insecure_network: true")


def test_insecure_network_in_words_lets_it_through_with_a_warning(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, TWO_HOSTS, security__tls__mode="off",
                                       security__insecure_network=True))
    assert result.exit_code == 0, result
    assert "warning: security.insecure_network is true and TLS is off" in result.stdout
    assert "read every prompt" in result.stdout


def test_tls_off_on_loopback_is_allowed_with_a_warning_naming_what_it_exposes():
    topo = Topology.model_validate({**DEMO, "security": {"tls": {"mode": "off"}}})
    [warning] = exposure_warnings(topo)
    assert "any user of this machine" in warning and "etcd keys" in warning


def test_files_mode_needs_all_three_pems(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, DEMO, security__tls={
        "mode": "files", "ca_file": "/etc/pki/ca.pem"}))
    assert_one_line_error(result, "cert_file, key_file", "mode: auto")


def test_a_pem_path_without_files_mode_is_refused(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, DEMO, security__tls={
        "ca_file": "/etc/pki/ca.pem"}))
    assert_one_line_error(result, "security.tls.ca_file", "mode: files")


def test_an_unknown_security_key_gets_a_suggestion(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, DEMO, security__insecure_netwrk=True))
    assert_one_line_error(result, "insecure_netwrk", "insecure_network")


def test_the_frontend_speaks_https_off_loopback_and_plain_http_on_it_by_default():
    local = Topology.model_validate(DEMO)
    assert local.security.frontend_tls(off_loopback=False) is False
    assert local.security.frontend_tls(off_loopback=True) is True
    asked = Topology.model_validate({**DEMO, "security": {"tls": {"frontend": True}}})
    assert asked.security.frontend_tls(off_loopback=False) is True


def test_a_multi_node_graph_with_tls_has_nothing_to_warn_about_its_planes():
    warnings = exposure_warnings(Topology.model_validate(TWO_HOSTS))
    assert not any("TLS" in w or "etcd" in w for w in warnings), warnings
