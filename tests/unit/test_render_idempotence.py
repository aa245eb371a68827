"""`render` of a rendered `topology.json` gives the same files as the original YAML, for
every example graph and every target: the topology.json a render (or `up`) writes carries
everything the renderers read, including what the user left unset."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import GRAPHS, single_head_topology
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.files import Target, render_files
from dis_serve.render.cluster_plan import ClusterPlan
from dis_serve.topology import Topology

EXAMPLES = sorted(p.name for p in GRAPHS.glob("*.yaml"))
TARGETS = [Target.LOCAL, Target.HOSTS, Target.SLURM, Target.K8S]
OUT = Path("rendered")


@pytest.mark.parametrize("target", TARGETS, ids=str)
@pytest.mark.parametrize("graph", EXAMPLES)
def test_rendering_the_rendered_topology_json_gives_the_same_files(graph, target, tmp_path):
    original = render_files(load_model_file(Topology, GRAPHS / graph), target, OUT)
    rendered_topology = tmp_path / "topology.json"
    rendered_topology.write_text(original["topology.json"])
    again = render_files(load_model_file(Topology, rendered_topology), target, OUT)
    assert sorted(again) == sorted(original)
    for name, text in original.items():
        assert again[name] == text, f"{graph} --target {target}: {name} differs"


def test_a_two_host_graph_re_rendered_keeps_its_frontend_on_the_head_address(tmp_path):
    files = render_files(single_head_topology(GRAPHS / "demo-two-hosts.yaml"), Target.HOSTS,
                         OUT)
    (tmp_path / "topology.json").write_text(files["hosts/topology.json"])
    again = render_files(load_model_file(Topology, tmp_path / "topology.json"), Target.HOSTS,
                         OUT)
    plan = ClusterPlan.model_validate_json(again["hosts/cluster-plan.json"])
    frontend = next(p for p in plan.head.processes if p.name == "frontend")
    assert frontend.argv[frontend.argv.index("--http-host") + 1] == "127.0.0.2"
    assert plan.endpoint == "https://127.0.0.2:8000"
