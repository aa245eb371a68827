"""The Kubernetes frontend's CPU comes from the graph's planned rate and the CPU per request
measured on the real frontend (benchmarks/frontend_cpu.py)."""

from __future__ import annotations

import json
import math

import yaml

from conftest import GRAPHS, REPO
from dis_serve.placements.kubernetes import pod as k8s_pod
from dis_serve.topology import Topology

DISAGG_70B = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())


def _topology(rate: float | None) -> Topology:
    data = {**DISAGG_70B, "frontend": {**DISAGG_70B.get("frontend", {}),
                                        "planned_rate_per_s": rate}}
    return Topology.model_validate(data)


def test_the_constants_are_the_fit_of_the_recorded_measurements():
    runs = json.loads((REPO / "benchmarks" / "baselines" / "frontend-cpu.json").read_text())[
        "runs"]
    for run in runs.values():
        worst = max(run["windows"], key=lambda w: w["cpu_s_per_request"])
        tokens = worst["prompt_tokens"] + worst["completion_tokens"]
        fitted = k8s_pod.FRONTEND_CPU_S_PER_REQUEST + k8s_pod.FRONTEND_CPU_S_PER_TOKEN * tokens
        assert math.isclose(fitted, worst["cpu_s_per_request"], rel_tol=0.05), (tokens, fitted)


def test_an_unplanned_graph_keeps_four_cpus():
    assert k8s_pod.frontend_resources(_topology(None))["limits"]["cpu"] == "4"


def test_the_cpu_grows_with_the_planned_rate_in_half_cpu_steps_with_headroom():
    topo = _topology(50)
    tokens = topo.model.max_input_tokens + topo.model.max_output_tokens
    need = 50 * (k8s_pod.FRONTEND_CPU_S_PER_REQUEST
                 + k8s_pod.FRONTEND_CPU_S_PER_TOKEN * tokens) * k8s_pod.FRONTEND_CPU_HEADROOM
    resources = k8s_pod.frontend_resources(topo)
    assert resources["requests"] == resources["limits"]
    assert k8s_pod.quantity_gib(resources["limits"]["cpu"]) * 2**30 == math.ceil(2 * need) / 2


def test_a_small_rate_still_gets_one_whole_cpu():
    assert k8s_pod.frontend_resources(_topology(1))["limits"]["cpu"] == "1"


def test_the_users_own_frontend_cpu_wins():
    data = {**DISAGG_70B, "frontend": {"planned_rate_per_s": 50},
            "kubernetes": {**DISAGG_70B["kubernetes"], "frontend_resources": {"cpu": "3"}}}
    assert k8s_pod.frontend_resources(Topology.model_validate(data))["limits"]["cpu"] == "3"
