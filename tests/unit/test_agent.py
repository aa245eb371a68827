"""The node agent's share of a multi-node graph (launch/agent.py): which processes, at which
addresses, and where its files go. No processes are started here."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from conftest import GRAPHS, single_head_topology
from dis_serve.errors import UserInputError
from dis_serve.launch.agent import NodeRunDir, node_launch_plan, runtime_values
from dis_serve.launch.node_data import claim_data_dir, coordination_data_dir
from dis_serve.placements.slurm.sbatch import render_slurm_plan
from dis_serve.render.run_layout import ADDRESSES_FILE
from dis_serve.topology import Topology

# Services on the head alone: the replicated layout's own tests are below.
THREE_NODES = single_head_topology(GRAPHS / "demo-3node-slurm.yaml")
ADDRESSES = "NODE_ADDR_0=198.18.0.11\nNODE_ADDR_1=198.18.0.12\nNODE_ADDR_2=198.18.0.13\n"


def _plans(tmp_path, node: str):
    plan = render_slurm_plan(THREE_NODES, run_dir=str(tmp_path))
    (tmp_path / ADDRESSES_FILE).write_text(ADDRESSES)
    values = runtime_values(plan, node, tmp_path, environ={}, data_dir=tmp_path / "local")
    return node_launch_plan(plan, node, values, tmp_path, THREE_NODES)


def test_a_worker_nodes_agent_runs_only_its_own_worker_at_its_own_address(tmp_path):
    own, whole = _plans(tmp_path, "node2")
    assert [p.name for p in own.processes] == ["decode-1"]
    decode = own.processes[0]
    assert decode.env["DYN_TCP_RPC_HOST"] == "198.18.0.13"
    assert decode.env["ETCD_ENDPOINTS"] == "https://198.18.0.11:2379"
    assert decode.readiness.url == "http://198.18.0.13:9102/health"
    assert own.endpoint == whole.endpoint == "https://198.18.0.11:8000"
    assert len(whole.processes) == 7  # etcd, nats, frontend, balancer, three workers


def test_the_head_nodes_agent_runs_etcd_nats_the_frontend_its_balancer_and_its_worker(tmp_path):
    own, _ = _plans(tmp_path, "node0")
    assert [p.name for p in own.processes] == ["etcd", "nats", "frontend", "balancer",
                                               "prefill-0"]


def test_the_agent_supervises_with_the_topologys_policies(tmp_path):
    own, _ = _plans(tmp_path, "node1")
    assert own.supervision == THREE_NODES.supervision


def test_an_unknown_node_is_one_line_naming_the_nodes(tmp_path):
    with pytest.raises(UserInputError, match=r"no node .node7. .*node0, node1, node2"):
        _plans(tmp_path, "node7")


def test_an_address_the_job_did_not_find_names_the_variable(tmp_path):
    plan = render_slurm_plan(THREE_NODES, run_dir=str(tmp_path))
    with pytest.raises(UserInputError, match="NODE_ADDR_0"):
        runtime_values(plan, "node1", tmp_path, environ={}, data_dir=tmp_path / "local")


def test_each_node_has_its_own_plan_state_and_log_beside_the_others(tmp_path):
    run = NodeRunDir(tmp_path, "node1")
    assert run.plan_file.name == "plan-node1.json"
    assert run.state_file.name == "state-node1.json"
    assert run.supervisor_log.name == "agent-node1.log"
    assert run.log_file("decode-0").name == "decode-0.log"


def _argument(spec, flag: str) -> str:
    return spec.argv[spec.argv.index(flag) + 1]


def test_etcd_and_nats_keep_their_data_in_the_node_local_directory_not_the_run_directory(
        tmp_path):
    own, _ = _plans(tmp_path, "node0")
    etcd, nats = own.processes[0], own.processes[1]
    assert _argument(etcd, "--data-dir") == f"{tmp_path}/local/etcd-data"
    assert _argument(nats, "-sd") == f"{tmp_path}/local/nats-data"


def test_the_data_directory_is_per_user_graph_and_slurm_job_under_tmpdir(monkeypatch):
    path = coordination_data_dir(THREE_NODES, {"TMPDIR": "/scratch", "SLURM_JOB_ID": "42"})
    assert path.parent.parent == Path("/scratch")
    assert path.parent.name.startswith("dis-serve-")
    assert path.name == f"{THREE_NODES.name}-42"
    assert coordination_data_dir(THREE_NODES, {}).parent.parent == Path("/tmp")


def test_the_topology_chooses_the_data_directory_over_tmpdir():
    topo = THREE_NODES.model_copy(update={"coordination": THREE_NODES.coordination.model_copy(
        update={"data_dir": "/local/ssd"})})
    path = coordination_data_dir(topo, {"TMPDIR": "/scratch"})
    assert path.parent.parent == Path("/local/ssd") and path.name == THREE_NODES.name


def test_the_data_directory_and_its_per_user_parent_are_private(tmp_path):
    path = tmp_path / "base" / "dis-serve-me" / "graph-1"
    claim = claim_data_dir(path, "graph")
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    claim.release()


def test_a_data_directory_that_is_a_link_is_refused(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "dis-serve-me").mkdir()
    (tmp_path / "dis-serve-me" / "graph").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UserInputError, match="symbolic link"):
        claim_data_dir(tmp_path / "dis-serve-me" / "graph", "graph")


def test_a_relative_data_directory_is_one_line_naming_the_key():
    data = THREE_NODES.model_dump(mode="json")
    data["coordination"]["data_dir"] = "scratch/ds"
    with pytest.raises(ValueError, match=r"coordination.data_dir 'scratch/ds' is not a plain "
                                         r"absolute path"):
        Topology.model_validate(data)
