"""The topology package: one module per area, every name importable from the package itself,
so `from dis_serve.topology import X` keeps working whichever module X lives in."""

from __future__ import annotations

import ast
from pathlib import Path

import dis_serve.topology as topology

MAX_MODULE_LINES = 400
# Its functions are Topology's validator, not names callers use.
INTERNAL = {"rules"}


def _sources() -> dict[str, Path]:
    return {path.stem: path for path in Path(topology.__file__).parent.glob("*.py")
            if path.stem != "__init__"}


def _defined(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_of_a_topology_module_is_exported_by_the_package():
    missing = {f"{stem}.{name}" for stem, path in _sources().items() if stem not in INTERNAL
               for name in _defined(path) if name not in topology.__all__}
    assert missing == set()


def test_every_name_the_package_exports_is_importable():
    assert [name for name in topology.__all__ if not hasattr(topology, name)] == []


def test_no_topology_module_is_longer_than_400_lines():
    long = {stem: lines for stem, path in _sources().items()
            if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
