"""House rules about the package's shape, read off its source with `ast`: no import cycle
between its modules nor between its packages, no CLI module importing another, no function
longer than a screen."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "toolkit" / "dis_serve"
MAX_FUNCTION_LINES = 60

# Known exceptions; each entry is deleted by the change that fixes it.
KNOWN_CYCLES: set[frozenset[str]] = set()
KNOWN_PACKAGE_CYCLES: set[frozenset[str]] = set()
KNOWN_LONG_FUNCTIONS: set[str] = set()
# The one CLI module that may import the others: it registers their command groups.
CLI_ROOT = "dis_serve.cli.app"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE.rglob("*.py")}


def _imported(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules this module imports anywhere (lazy and type-only imports count: a
    cycle through them is still a cycle)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            candidates = [target, *(f"{target}.{alias.name}" for alias in node.names)]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found |= {c for c in candidates if c in known and c != name}
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imported(name, path, set(modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    found = set(cycles(import_graph()))
    assert found - KNOWN_CYCLES == set(), [sorted(c) for c in found - KNOWN_CYCLES]


def package_of(module: str) -> str:
    """A module's node in the package graph: its subpackage (`dis_serve.launch`), or itself
    for a top-level module (`dis_serve.coordination.probes`)."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        here = package_of(module)
        packages.setdefault(here, set()).update(
            package_of(other) for other in imported if package_of(other) != here)
    return packages


def test_the_packages_import_each_other_without_a_cycle():
    found = set(cycles(package_graph(import_graph())))
    assert found - KNOWN_PACKAGE_CYCLES == set(), [sorted(c) for c in found
                                                   - KNOWN_PACKAGE_CYCLES]


def test_a_package_cycle_through_one_lazy_import_is_found():
    graph = {"dis_serve.launch.graph": {"dis_serve.coordination.shared"},
             "dis_serve.coordination.shared": set(),
             "dis_serve.coordination.doctor": {"dis_serve.launch.rundir"},
             "dis_serve.launch.rundir": set()}
    assert cycles(package_graph(graph)) == [
        frozenset({"dis_serve.launch", "dis_serve.coordination"})]


def cli_to_cli(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """CLI modules that import other CLI modules (the app registering them aside)."""
    return {module: {other for other in imported if other.startswith("dis_serve.cli.")}
            for module, imported in graph.items()
            if module.startswith("dis_serve.cli.") and module != CLI_ROOT
            and any(other.startswith("dis_serve.cli.") for other in imported)}


def test_no_cli_module_imports_another():
    assert cli_to_cli(import_graph()) == {}


def test_a_cli_module_importing_another_is_found():
    graph = {"dis_serve.cli.app": {"dis_serve.cli.launch_cmds"},
             "dis_serve.cli.launch_cmds": {"dis_serve.cli.doctor_cmds", "dis_serve.launch"},
             "dis_serve.cli.doctor_cmds": set()}
    assert cli_to_cli(graph) == {"dis_serve.cli.launch_cmds": {"dis_serve.cli.doctor_cmds"}}


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [
        frozenset({"a", "b", "c"})]


def _functions(tree: ast.AST, prefix: str):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield f"{prefix}.{node.name}", node
            yield from _functions(node, f"{prefix}.{node.name}")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}.{node.name}")


def test_no_function_in_the_package_is_longer_than_60_lines():
    long = {}
    for name, path in _modules().items():
        for qualified, node in _functions(ast.parse(path.read_text()), name):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES:
                long[qualified] = lines
    assert set(long) - KNOWN_LONG_FUNCTIONS == set(), long
