"""Only the placement modules name a placement: adding one is a new package under
`placements/` and one registry entry, never an edit of the CLI, the launcher or a verb.
Read off the source with `ast`. The schema (`topology/`: the placement enum, the placement
sections and their rules) and `placements/` itself (each placement's package and the
registry) are where placements are named; there are no known exceptions."""

from __future__ import annotations

import ast

from conftest import REPO
from dis_serve.placements.registry import target_names
from dis_serve.topology import PlacementKind

PACKAGE = REPO / "toolkit" / "dis_serve"
# Where placements are named on purpose: the schema, and the placement modules with their
# registry.
HOMES = ("topology", "placements")
NAMES = {*(kind.value for kind in PlacementKind), *target_names(), "kubernetes"}
# The schema's sections of one placement each, and the enum's members.
SECTION_CLASSES = {"HostsPlacement", "SlurmPlacement", "Kubernetes"}
SECTION_ATTRIBUTES = {"hosts", "slurm", "kubernetes"}
# Each placement's package (and the one hosts and Slurm share).
PLACEMENT_PACKAGES = {path.parent.name for path in (PACKAGE / "placements").glob("*/__init__.py")}
ENUMS = {"PlacementKind": set(PlacementKind.__members__), "Target": {n.upper() for n in NAMES}}


def namings(source: str) -> list[str]:
    """Each place the source names a specific placement, as `line: what`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        what = None
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.attr in ENUMS.get(node.value.id, ()):
                what = f"{node.value.id}.{node.attr}"
            elif node.attr in SECTION_ATTRIBUTES:
                what = f".{node.attr}"
        elif isinstance(node, ast.Name) and node.id in SECTION_CLASSES:
            what = node.id
        elif isinstance(node, ast.Constant) and node.value in NAMES:
            what = repr(node.value)
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            inside = parts[parts.index("placements") + 1:] if "placements" in parts else []
            if inside and inside[0] in PLACEMENT_PACKAGES:
                what = f"import of {node.module}"
        if what is not None:
            found.append(f"{node.lineno}: {what}")
    return found


def test_no_module_outside_the_placement_modules_names_a_placement():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] in HOMES:
            continue
        if hits := namings(path.read_text()):
            found[str(relative)] = hits
    assert found == {}


def test_a_module_naming_a_placement_is_found():
    source = '''
from ..placements.slurm.queue import read_job
from ..topology import PlacementKind
if topo.placement.kind is PlacementKind.SLURM or topo.placement.hosts:
    target = "k8s"
'''
    assert sorted(namings(source)) == ["2: import of placements.slurm.queue", "4: .hosts",
                                       "4: PlacementKind.SLURM", "5: 'k8s'"]


def test_a_capability_of_the_placement_enum_is_not_a_placement():
    assert namings("if kind.multi_node or PlacementKind.supervised_here():\n    pass") == []
