"""Files several placements render the same way: the engine configs under a placement's
directory, and the topology every rendered directory carries."""

from __future__ import annotations

import json
from pathlib import Path

from ..engines import engine_for
from ..render.engine_config import dump_engine_config, engine_config_path, render_engine_configs
from ..topology import Topology

TOPOLOGY_FILE = "topology.json"


def engine_config_files(topo: Topology, directory: str) -> dict[str, str]:
    """One YAML per pool role at the paths the plan's --extra-engine-args name."""
    if not engine_for(topo.backend).uses_engine_config:
        return {}
    return {str(engine_config_path(Path(directory), role)): dump_engine_config(config)
            for role, config in render_engine_configs(topo).items()}


def topology_json(topo: Topology) -> str:
    """The topology as `render` writes it beside the targets (JSON, every default filled)."""
    return json.dumps(topo.model_dump(mode="json"), indent=2) + "\n"
