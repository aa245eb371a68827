"""Topology -> the engine config file of each pool (what `--extra-engine-args` names), where
a run directory or a rendered target keeps them.

What a config holds is the engine's (engines/: TensorRT-LLM's from its role templates); this
module names the files and writes them. Pure apart from `write_engine_configs`, the one
function that touches the file system.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from ..engines import engine_for
from ..topology import PoolRole, Topology
from .run_layout import ENGINE_CONFIG_DIR

"""The folder of a run directory (or of a rendered target) that holds the engine configs."""


def engine_config_name(role: PoolRole) -> str:
    """A pool role's engine config file inside an engine-config folder: a run directory's
    ENGINE_CONFIG_DIR, or the ConfigMap Kubernetes mounts."""
    return f"{role.value}.yaml"


def engine_config_path(run_dir: Path, role: PoolRole) -> Path:
    """Where a pool role's engine config lies in a run directory (or a rendered target's
    folder); what `--extra-engine-args` of its workers names."""
    return run_dir / ENGINE_CONFIG_DIR / engine_config_name(role)


def render_engine_configs(topo: Topology) -> dict[PoolRole, dict[str, Any]]:
    """Each pool role's engine config, as the topology's engine writes it ({}: its workers
    read none)."""
    return engine_for(topo.backend).engine_configs(topo)


def dump_engine_config(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def write_engine_configs(topo: Topology, run_dir: Path) -> dict[PoolRole, Path]:
    """Write each pool's config where the launch plan's `--extra-engine-args` points."""
    written = {}
    for role, config in render_engine_configs(topo).items():
        path = engine_config_path(run_dir, role)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_engine_config(config))
        written[role] = path
    return written
