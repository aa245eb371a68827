"""Placement: nodes in the topology, workers packed onto them, and what validate warns about."""

from __future__ import annotations

import copy

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS, single_head
from dis_serve.render.cluster_plan import ClusterContext, render_cluster_plan
from dis_serve.render.node_layout import kv_transfer_mib, node_layout, placement_warnings
from dis_serve.topology import PlacementKind, Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
DISAGG_70B = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())
TWO_HOSTS = {"hosts": {"nodes": [{"name": "head", "address": "10.0.0.1", "gpus": 0},
                                 {"name": "gpu1", "address": "10.0.0.2"}]}}


def _topo(base: dict, placement: dict | None = None, **top) -> Topology:
    data = copy.deepcopy(base) | top
    if placement is not None:
        data["placement"] = placement
    return Topology.model_validate(data)


def test_no_placement_is_local():
    assert _topo(DEMO).placement.kind is PlacementKind.LOCAL


def test_the_head_node_runs_etcd_nats_frontend_and_balancer_and_workers_pack_by_gpu_count():
    topo = _topo(single_head(DEMO), TWO_HOSTS, hardware={"nodes": 2, "gpus_per_node": 8})
    head, gpu1 = node_layout(topo)
    assert head.processes == ["etcd", "nats", "frontend", "balancer"]
    assert gpu1.processes == ["prefill-0", "decode-0"]
    assert [w.gpus for w in gpu1.workers] == [(0,), (1,)]


EXTERNAL_ETCD_NO_NATS = {"etcd": {"mode": "external", "url": "http://10.0.0.9:2379"},
                         "nats": {"mode": "off"}, "event_plane": "zmq"}


def test_the_head_node_shows_no_etcd_or_nats_when_they_are_external_or_off():
    topo = _topo(single_head(DEMO), TWO_HOSTS, hardware={"nodes": 2},
                 coordination=EXTERNAL_ETCD_NO_NATS)
    head, _ = node_layout(topo)
    assert head.processes == ["frontend", "balancer"]


@pytest.mark.parametrize("coordination", [
    {}, EXTERNAL_ETCD_NO_NATS,
    {"nats": {"mode": "external", "url": "nats://10.0.0.9:4222"}},
], ids=["embedded", "external-etcd-no-nats", "external-nats"])
def test_validate_shows_on_each_node_the_processes_its_script_starts(coordination):
    topo = _topo(DEMO, TWO_HOSTS, hardware={"nodes": 2}, coordination=coordination)
    plan = render_cluster_plan(topo, ClusterContext(
        run_dir="/run/demo", node_addresses=["10.0.0.1", "10.0.0.2"]))
    assert [n.processes for n in node_layout(topo)] == [
        [p.name for p in node.processes] for node in plan.nodes]


def test_the_70b_graph_on_slurm_puts_prefill_on_the_head_and_decode_on_five_nodes():
    layout = node_layout(_topo(DISAGG_70B, {"slurm": {"partition": "gpu"}}))
    assert [len(n.workers) for n in layout] == [2, 2, 2, 2, 2, 2]
    assert all(w.role.value == "decode" for n in layout[1:] for w in n.workers)
    assert all(n.address is None for n in layout)  # resolved on each node when the job runs


def test_a_host_count_that_disagrees_with_hardware_nodes_is_refused():
    with pytest.raises(ValidationError, match=r"lists 2 nodes but hardware\.nodes is 1"):
        _topo(DEMO, TWO_HOSTS)


def test_hosts_and_slurm_together_are_refused():
    with pytest.raises(ValidationError, match="both hosts and slurm"):
        _topo(DEMO, TWO_HOSTS | {"slurm": {}}, hardware={"nodes": 2})


def test_a_loopback_etcd_url_is_refused_when_workers_run_on_other_nodes():
    with pytest.raises(ValidationError, match="loopback address but placement is hosts"):
        _topo(DEMO, TWO_HOSTS, hardware={"nodes": 2}, coordination={
            "etcd": {"mode": "external", "url": "http://127.0.0.1:2379"}})


def test_a_slurm_time_limit_must_be_a_slurm_time():
    with pytest.raises(ValidationError, match="is not a Slurm time"):
        _topo(DEMO, {"slurm": {"time_limit": "two hours"}})


def test_workers_that_do_not_fit_the_hosts_gpus_are_refused():
    hosts = copy.deepcopy(TWO_HOSTS)
    hosts["hosts"]["nodes"][1]["gpus"] = 1
    with pytest.raises(ValidationError, match=r"pools need 2 GPUs .*\(nodes with 0\+1\)"):
        _topo(DEMO, hosts, hardware={"nodes": 2})


def test_prefill_and_decode_on_different_nodes_over_tcp_warn_with_the_transfer_size():
    topo = _topo(DISAGG_70B, {"slurm": {}})
    size = kv_transfer_mib(topo)
    assert round(size) == 480  # 3072 tokens x 80 layers x 8 KV heads x 128 x 2 (K, V) x 1 B
    crossing = [w for w in placement_warnings(topo) if "KV cache" in w]
    assert len(crossing) == 1 and "480 MiB" in crossing[0]


def test_rdma_interconnect_silences_the_kv_transfer_warning():
    topo = _topo(DISAGG_70B, {"slurm": {}, "interconnect": "rdma"})
    assert not [w for w in placement_warnings(topo) if "KV cache" in w]


def test_nats_beyond_loopback_without_a_token_warns_and_with_one_does_not():
    plain = _topo(DEMO, TWO_HOSTS, hardware={"nodes": 2})
    assert any("NATS listens on 10.0.0.1 without authentication" in w
               for w in placement_warnings(plain))
    secured = _topo(DEMO, TWO_HOSTS, hardware={"nodes": 2}, coordination={
        "nats": {"auth": {"token_env": "MY_NATS_TOKEN"}}})
    assert not any("NATS" in w for w in placement_warnings(secured))


def test_nats_auth_needs_exactly_one_token_source():
    with pytest.raises(ValidationError, match="exactly one of token_file or token_env"):
        _topo(DEMO, coordination={"nats": {"auth": {}}})


def test_a_partition_with_a_line_break_is_refused():
    with pytest.raises(ValidationError, match=r"placement\.slurm\.partition .* #SBATCH line"):
        _topo(DEMO, {"slurm": {"partition": "gpu\nrm -rf /"}})


def test_a_host_address_must_be_an_address():
    hosts = copy.deepcopy(TWO_HOSTS)
    hosts["hosts"]["nodes"][1]["address"] = "10.0.0.2; reboot"
    with pytest.raises(ValidationError, match="is not an IP address or host name"):
        _topo(DEMO, hosts, hardware={"nodes": 2})
