"""`relocate`: two copies of a graph share no name and no port."""

from __future__ import annotations

import yaml

from conftest import GRAPHS
from dis_serve.inputs.yaml_input import parse_model
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import Topology
from relocate import relocate


def _ports_and_namespace(data: dict, tmp_path) -> tuple[set[int], str]:
    topo = parse_model(Topology, data, "test")
    plan = render_launch_plan(topo, RenderContext(run_dir=tmp_path))
    return {p for spec in plan.processes for p in spec.ports.values()}, plan.namespace


def test_two_relocated_copies_share_no_port_and_no_namespace(tmp_path):
    demo = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    ports_a, ns_a = _ports_and_namespace(relocate(demo, "copy-a", 21000), tmp_path)
    ports_b, ns_b = _ports_and_namespace(relocate(demo, "copy-b", 22000), tmp_path)
    assert ports_a.isdisjoint(ports_b)
    assert ns_a != ns_b
    assert min(ports_a) == 21000


def test_relocation_keeps_the_other_coordination_settings():
    demo = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    demo["coordination"] = {"event_plane": "zmq", "nats": {"mode": "embedded"}}
    moved = relocate(demo, "copy", 23000)
    assert moved["coordination"]["event_plane"] == "zmq"
    assert moved["coordination"]["nats"] == {"mode": "embedded", "port": 23003,
                                             "cluster_port": 23005}
