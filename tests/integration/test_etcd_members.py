"""A 3-member etcd as the graph runs it (render/launch_plan.etcd_spec: one member per node,
mutual TLS on client and peer URLs with the graph's CA), on three loopback addresses: the
members bootstrap `new`; a member whose data is gone rejoins the running cluster
(launch/etcd_members.py: `member remove`, `member add`, `existing`) and the cluster has
three healthy members again."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import GRAPHS, wait_until
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.etcd_members import EXISTING, NEW, MemberPlace, member_start_state
from dis_serve.launch.preflight import find_binary
from dis_serve.render.launch_plan import ETCD_CLUSTER_STATE_ENV, EtcdMember, etcd_spec
from dis_serve.security.certs import issue_graph_pki, write_pki
from dis_serve.topology import Topology
from relocate import relocate

pytestmark = pytest.mark.integration
BASE = 19070
HOSTS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
NAMES = ("m0", "m1", "m2")


@pytest.fixture
def members(tmp_path):
    topo = Topology.model_validate(relocate(
        load_model_file(Topology, GRAPHS / "demo.yaml").model_dump(mode="json",
                                                                  exclude_unset=True),
        "etcd-members", BASE))
    tls = write_pki(issue_graph_pki("etcd-members", list(HOSTS)), tmp_path / "tls")
    peers = [EtcdMember(name=n, peer_url=f"https://{h}:{BASE + 2}")
             for n, h in zip(NAMES, HOSTS, strict=True)]
    etcd = find_binary("etcd")
    specs = [etcd_spec(topo, etcd, host, str(tmp_path / f"data-{name}"), tls, member=name,
                       members=peers, name=f"etcd-{i}")
             for i, (name, host) in enumerate(zip(NAMES, HOSTS, strict=True))]
    running: dict[int, subprocess.Popen] = {}

    def start(i: int, state: str) -> None:
        log = (tmp_path / f"etcd-{i}.log").open("ab")
        running[i] = subprocess.Popen(specs[i].argv, stdout=log, stderr=subprocess.STDOUT,
                                      env={"PATH": "/usr/bin:/bin",
                                           ETCD_CLUSTER_STATE_ENV: state})

    try:
        yield topo, tls, specs, start, running, tmp_path
    finally:
        for proc in running.values():
            proc.kill()
            proc.wait()


def _healthy_members(tls, tmp_path: Path) -> int:
    etcdctl = find_binary("etcdctl")
    out = subprocess.run(
        [etcdctl, f"--endpoints={','.join(f'https://{h}:{BASE + 1}' for h in HOSTS)}",
         f"--cacert={tls.ca_cert}", f"--cert={tls.client_cert}", f"--key={tls.client_key}",
         "endpoint", "health", "--write-out=json"], capture_output=True, text=True,
        timeout=30, check=False)
    try:
        return sum(1 for e in json.loads(out.stdout) if e.get("health"))
    except ValueError:
        return 0


def test_a_member_whose_data_is_gone_rejoins_the_running_cluster(members):
    _topo, tls, _specs, start, running, tmp_path = members
    place = [MemberPlace(name=n, peer_url=f"https://{h}:{BASE + 2}",
                         others=[f"https://{o}:{BASE + 1}" for o in HOSTS if o != h])
             for n, h in zip(NAMES, HOSTS, strict=True)]
    assert member_start_state(place[0], tls) == NEW  # nothing answers yet
    for i in range(3):
        start(i, NEW)
    assert wait_until(lambda: _healthy_members(tls, tmp_path) == 3, timeout=30)

    running[2].kill()
    running[2].wait()
    shutil.rmtree(tmp_path / "data-m2")
    started = time.monotonic()
    assert member_start_state(place[2], tls) == EXISTING
    start(2, EXISTING)
    assert wait_until(lambda: _healthy_members(tls, tmp_path) == 3, timeout=30), \
        (tmp_path / "etcd-2.log").read_text()[-2000:]
    rejoined = round(time.monotonic() - started, 2)
    print(f"\nFIGURES {json.dumps({'etcd_member_rejoined_s': rejoined})}")
