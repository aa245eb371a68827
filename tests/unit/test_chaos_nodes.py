"""Chaos faults on named nodes of a Slurm or hosts graph: what a fault may name, how it is
shown, and which names `chaos` refuses before anything starts."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS, REPO
from dis_serve.chaos.runner import check_targets
from dis_serve.chaos.scenario import ChaosScenario, Fault
from dis_serve.errors import UserInputError
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.topology import Topology

THREE_NODES = load_model_file(Topology, GRAPHS / "demo-3node-slurm.yaml")
DEMO = load_model_file(Topology, GRAPHS / "demo.yaml")


def _scenario(*faults: dict) -> ChaosScenario:
    data = yaml.safe_load((REPO / "benchmarks" / "chaos-demo.yaml").read_text())
    data["faults"] = list(faults)
    return ChaosScenario.model_validate(data)


def test_a_fault_names_a_process_a_process_on_a_node_or_a_whole_node():
    assert Fault(at_s=1, action="kill", process="decode-1").target == "decode-1"
    assert Fault(at_s=1, action="kill", process="decode-1", node="node2").target \
        == "decode-1 on node2"
    assert Fault(at_s=1, action="pause", node="node2", duration_s=20).target == "node node2"
    with pytest.raises(ValidationError, match="give process, node, or both"):
        Fault(at_s=1, action="kill")


def test_a_node_the_graph_has_is_accepted_and_another_refused_naming_the_nodes():
    check_targets(THREE_NODES, _scenario(
        {"at_s": 1, "action": "pause", "node": "node2", "duration_s": 20}), "s.yaml")
    with pytest.raises(UserInputError, match="node0, node1, node2") as err:
        check_targets(THREE_NODES, _scenario({"at_s": 1, "action": "kill", "node": "n9"}),
                      "s.yaml")
    assert err.value.key == "faults[0].node"


def test_a_node_on_a_graph_that_runs_on_one_machine_is_refused():
    with pytest.raises(UserInputError, match="runs on one machine"):
        check_targets(DEMO, _scenario({"at_s": 1, "action": "kill", "process": "decode-0",
                                       "node": "node1"}), "s.yaml")


def test_head_names_the_graphs_head_node_whatever_its_name():
    check_targets(THREE_NODES, _scenario({"at_s": 1, "action": "kill", "node": "head"}),
                  "s.yaml")
