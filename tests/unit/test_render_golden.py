"""Golden files: every example graph renders to exactly the checked-in output.

Regenerate on purpose with `DIS_SERVE_UPDATE_GOLDEN=1 pytest tests/unit/test_render_golden.py`
and review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import GRAPHS, REPO
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.files import Target, render_files
from dis_serve.topology import Topology

GOLDEN = REPO / "tests" / "golden"
EXAMPLES = sorted(p.name for p in GRAPHS.glob("*.yaml"))
# Relative, so the golden files do not depend on where the repository lives.
OUT = Path("rendered")


@pytest.mark.parametrize("graph", EXAMPLES)
def test_example_renders_to_its_golden_files(graph):
    topo = load_model_file(Topology, GRAPHS / graph)
    files = render_files(topo, Target.ALL, OUT)
    golden_dir = GOLDEN / graph.removesuffix(".yaml")
    if os.environ.get("DIS_SERVE_UPDATE_GOLDEN") == "1":
        for relative, text in files.items():
            (golden_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            (golden_dir / relative).write_text(text)
    expected = {str(p.relative_to(golden_dir)): p.read_text()
                for p in golden_dir.rglob("*") if p.is_file()}
    assert sorted(files) == sorted(expected)
    for relative, text in files.items():
        assert text == expected[relative], f"{graph}: {relative} differs from its golden file"


def test_rendering_twice_gives_identical_files():
    topo = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
    assert render_files(topo, Target.ALL, OUT) == render_files(topo, Target.ALL, OUT)


def test_local_target_writes_no_kubernetes_manifest():
    topo = load_model_file(Topology, GRAPHS / "demo.yaml")
    files = render_files(topo, Target.LOCAL, OUT)
    assert "local/launch.sh" in files
    assert not any(name.startswith("k8s/") for name in files)
