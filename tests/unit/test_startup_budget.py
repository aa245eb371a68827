"""How long `up` waits for a graph: the caller's timeout, else the workers' startup budget."""

from __future__ import annotations

from conftest import GRAPHS
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.startup_budget import readiness_timeout_s, worker_startup_budget_s
from dis_serve.topology import Topology


def test_without_a_timeout_up_waits_the_workers_startup_budget():
    topo = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
    assert readiness_timeout_s(topo) == worker_startup_budget_s(topo) > 900


def test_a_timeout_the_caller_gives_wins_over_the_budget():
    topo = load_model_file(Topology, GRAPHS / "demo.yaml")
    assert readiness_timeout_s(topo, 7.5) == 7.5
