"""Engines are modules behind one registry: every `backend` has one, a missing one is an
error, and no module outside the engine modules names a specific engine (read off the source
with `ast`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from conftest import REPO
from dis_serve import engines
from dis_serve.engines import ENGINES, engine_for, planned_engine, twin_engine, worker_metrics
from dis_serve.engines.base import EngineMetrics
from dis_serve.errors import UserInputError
from dis_serve.topology import Backend

PACKAGE = REPO / "toolkit" / "dis_serve"
# Where engines may be named: the engine modules and their registry, and the schema's enum
# of the names users write.
ENGINE_HOMES = (PACKAGE / "engines", PACKAGE / "topology" / "enums.py")
# Package data laid out by engine (configs/trtllm/): the schema's memory check reads
# TensorRT-LLM's KV-cache share from there, and the schema sits below the engine modules.
PACKAGE_DATA = (PACKAGE / "builtin" / "__init__.py",)


def _engine_words(names: list[str]) -> re.Pattern[str]:
    """A string that is an engine's identity: its name, its Python module, or a metric
    name under its prefix (`trtllm:...`, `trtllm_...`)."""
    alternatives = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?:dynamo\.)?(?:{alternatives})(?:[:_].*)?", re.DOTALL)


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, nodes) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def engine_names_in(source: str, names: list[str], members: list[str]) -> list[str]:
    """Where `source` names a specific engine: `Backend.<MEMBER>`, a string that is an
    engine's identity (prose in docstrings and comments aside), or an import of one engine's
    module rather than the registry."""
    tree = ast.parse(source)
    words, docs = _engine_words(names), _docstrings(tree)
    modules = {f"engines.{n}" for n in names}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "Backend" and node.attr in members):
            found.append(f"{node.lineno}: Backend.{node.attr}")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and id(node) not in docs and words.fullmatch(node.value)):
            found.append(f"{node.lineno}: {node.value!r}")
        elif isinstance(node, ast.ImportFrom | ast.Import):
            imported = [node.module or ""] if isinstance(node, ast.ImportFrom) else [
                alias.name for alias in node.names]
            found += [f"{node.lineno}: imports {name}" for name in imported
                      if any(name.endswith(m) for m in modules)]
    return sorted(found, key=lambda hit: int(hit.split(":")[0]))


def _outside_engine_homes() -> list[Path]:
    def home(path: Path) -> bool:
        return any(path == h or h in path.parents for h in (*ENGINE_HOMES, *PACKAGE_DATA))
    return [p for p in sorted(PACKAGE.rglob("*.py")) if not home(p)]


def test_no_module_outside_the_engine_modules_names_a_specific_engine():
    names = [b.value for b in Backend]
    members = [b.name for b in Backend]
    found = {str(p.relative_to(PACKAGE)): hits for p in _outside_engine_homes()
             if (hits := engine_names_in(p.read_text(), names, members))}
    assert found == {}


def test_the_finder_finds_each_way_of_naming_an_engine():
    source = '''"""About trtllm, in prose."""
from ..engines.trtllm import WORKER_ENV
from ..engines import engine_for
if topo.backend is Backend.TRTLLM:
    gauge = "trtllm:kv_cache_usage_perc"
    module = "dynamo.mocker"
kind = "mocker"
label = "mocker profile"
'''
    assert engine_names_in(source, ["trtllm", "mocker"], ["TRTLLM", "MOCKER"]) == [
        "2: imports engines.trtllm", "4: Backend.TRTLLM",
        "5: 'trtllm:kv_cache_usage_perc'", "6: 'dynamo.mocker'", "7: 'mocker'"]


def test_every_backend_has_its_engine_module():
    assert {b: engine_for(b).backend for b in Backend} == {b: b for b in Backend}


def test_a_backend_without_an_engine_module_is_an_error_not_another_engines(monkeypatch):
    monkeypatch.setattr(engines, "ENGINES", {b: e for b, e in ENGINES.items()
                                             if b is not Backend.TRTLLM})
    with pytest.raises(UserInputError, match=r"backend: trtllm has no engine module.*mocker"):
        engine_for(Backend.TRTLLM)


def test_the_planner_plans_one_engine_and_imitates_it_with_another():
    assert planned_engine().aiconfigurator_backend is not None
    assert twin_engine() is not planned_engine()


def test_engines_that_publish_a_figure_publish_it_under_one_name():
    # `top`, bench and the dashboards do not know which engine a worker runs: they read one
    # name per figure (engines.worker_metrics).
    merged = worker_metrics()
    for figure in EngineMetrics.FIGURES:
        names = {getattr(e.metrics, figure) for e in ENGINES.values()} - {None}
        assert names <= {getattr(merged, figure)}, figure
