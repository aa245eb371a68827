"""The engines a graph's workers run, one module each (base.py says what a module declares),
and the one table from the topology's `backend` to its module.

Everything that differs between engines is asked of `engine_for(topo.backend)`; no module
outside this package tests which engine a graph runs. A `backend` without an entry here is an
error, never another engine's behaviour. Adding an engine: docs/architecture.md.
"""

from __future__ import annotations

from ..errors import UserInputError
from ..topology import Backend
from .base import Engine, EngineMetrics
from .mocker import MOCKER
from .trtllm import TRTLLM

ENGINES: dict[Backend, Engine] = {engine.backend: engine for engine in (TRTLLM, MOCKER)}


def engine_for(backend: Backend) -> Engine:
    engine = ENGINES.get(backend)
    if engine is None:
        raise UserInputError(f"{backend.value} has no engine module in dis-serve",
                             key="backend", fix=f"use one of {', '.join(ENGINES)}")
    return engine


def _only(found: list[Engine], what: str) -> Engine:
    if len(found) != 1:
        raise LookupError(f"{len(found)} registered engines {what}; the planner needs one")
    return found[0]


def planned_engine() -> Engine:
    """The engine the planner sizes graphs for: the one AIConfigurator's database times."""
    return _only([e for e in ENGINES.values() if e.aiconfigurator_backend is not None],
                 "have an AIConfigurator backend")


def twin_engine() -> Engine:
    """The engine the planner's mock graph runs: the one that imitates a planned graph."""
    return _only([e for e in ENGINES.values() if e.twin_settings is not None],
                 "imitate a planned graph")


def worker_metrics() -> EngineMetrics:
    """The engine metric names `top`, bench and the dashboards read, which do not know
    which engine a worker runs: each figure under the one name every registered engine that
    publishes it uses (tests/unit/test_engines.py checks that they agree)."""
    names = {figure: next((getattr(e.metrics, figure) for e in ENGINES.values()
                           if getattr(e.metrics, figure) is not None), None)
             for figure in EngineMetrics.FIGURES}
    deprecated = tuple(dict.fromkeys(n for e in ENGINES.values() for n in e.metrics.deprecated))
    return EngineMetrics(**names, deprecated=deprecated)


def engine_distributions() -> tuple[str, ...]:
    """Every registered engine's distributions (the fingerprint's versions)."""
    return tuple(dict.fromkeys(d for e in ENGINES.values() for d in e.distributions))
