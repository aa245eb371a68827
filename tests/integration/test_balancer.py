"""The rendered load-balancer and floating-address configurations pass haproxy's and
keepalived's own configuration checks (`haproxy -c`, `keepalived -t`), with the graph's real
certificate files in place. Nothing listens: these are the tools' parsers."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from dis_serve.render.balancer import (
    BalancerSettings,
    BalancerTls,
    Replica,
    VrrpSettings,
    haproxy_config,
    hold_script_text,
    keepalived_config,
)
from dis_serve.security.certs import issue_graph_pki

pytestmark = pytest.mark.integration


def _binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/sbin/{name}" if Path(f"/usr/sbin/{name}").is_file()
                                   else None)
    if found is None:
        pytest.skip(f"{name} is not installed (make install adds it as root)")
    return found


@pytest.fixture(scope="module")
def tls(tmp_path_factory) -> BalancerTls:
    pki = issue_graph_pki("balancer-test", ["10.0.0.1", "10.0.0.100"])
    directory = tmp_path_factory.mktemp("tls with space")
    files = {"server.pem": pki.server_cert + pki.server_key, "ca.pem": pki.ca_cert,
             "client.pem": pki.client_cert + pki.client_key}
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return BalancerTls(server_pem=str(directory / "server.pem"),
                       ca_cert=str(directory / "ca.pem"),
                       client_pem=str(directory / "client.pem"),
                       client_ca=str(directory / "ca.pem"))


def test_haproxy_accepts_the_balancer_of_an_https_graph(tmp_path, tls):
    config, script = tmp_path / "haproxy.cfg", tmp_path / "hold.lua"
    script.write_text(hold_script_text())
    config.write_text(haproxy_config(BalancerSettings(
        bind_host="10.0.0.100", bind_port=18801, floating=True, model_name="org/model 7b",
        replicas=[Replica(name="frontend-0", host="10.0.0.1", port=18802),
                  Replica(name="frontend-1", host="10.0.0.2", port=18803)],
        monitor_socket=str(tmp_path / "monitor.sock"), hold_socket=str(tmp_path / "hold.sock"),
        hold_script=str(script), tls=tls)))
    checked = subprocess.run([_binary("haproxy"), "-c", "-f", str(config)],
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_keepalived_accepts_the_floating_address(tmp_path):
    config = tmp_path / "keepalived.conf"
    config.write_text(keepalived_config(VrrpSettings(
        instance="dis-serve-demo", router_id=51, interface="eth0", address="10.0.0.1",
        peers=["10.0.0.2", "10.0.0.3"], floating_address="10.0.0.100",
        monitor_socket=str(tmp_path / "monitor.sock"), bid_file=str(tmp_path / "bid"),
        first=False)))
    report = tmp_path / "check.log"
    checked = subprocess.run([_binary("keepalived"), f"-t{report}", "-f", str(config)],
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, report.read_text() if report.exists() else checked.stderr


@pytest.mark.parametrize("replicas", [1, 2])
def test_haproxy_accepts_the_balancer_a_graph_on_one_machine_writes(tmp_path, replicas):
    """A graph on one machine with one frontend or two replicas over HTTPS: `up` writes its
    balancer's configuration, hold script and certificate bundles (launch/node_configs.py)
    from the graph's own certificates; haproxy's parser takes them, in front of every
    frontend."""
    from conftest import GRAPHS
    from dis_serve.inputs.yaml_input import load_model_file
    from dis_serve.launch.node_configs import write_local_balancer
    from dis_serve.render.balancer import balancer_config_name
    from dis_serve.render.launch_plan import LOCAL_NODE, RenderContext, render_launch_plan
    from dis_serve.security.certs import write_pki
    from dis_serve.security.pki_files import TLS_DIR
    from dis_serve.topology import Topology

    data = load_model_file(Topology, GRAPHS / "demo.yaml").model_dump(mode="json",
                                                                     exclude_unset=True)
    data["frontend"] = dict(data.get("frontend") or {}) | {"replicas": replicas}
    data["security"] = {"tls": {"frontend": True}}
    topo = Topology.model_validate(data)
    assert topo.frontend_https
    write_pki(issue_graph_pki(topo.name, ["127.0.0.1"]), tmp_path / TLS_DIR)
    own = tmp_path / "own"  # the balancer's own directory, outside the run directory
    own.mkdir(mode=0o700)
    plan = render_launch_plan(topo, RenderContext(run_dir=tmp_path, balancer_dir=own))
    write_local_balancer(topo, plan, tmp_path, own)
    config = own / balancer_config_name(LOCAL_NODE)
    text = config.read_text()
    assert all(f"127.0.0.1:{topo.frontend.first_replica_port + i}" in text
               for i in range(replicas)), text
    checked = subprocess.run([_binary("haproxy"), "-c", "-C", str(own), "-f", str(config)],
                             capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
