"""Files several placements render the same way (the engine configs under a placement's
directory, the topology every rendered directory carries), and the one writer of generated
files, for `render` and for the run directories `up` and `prepare` make."""

from __future__ import annotations

import json
from pathlib import Path

from ..engines import engine_for
from ..files.atomic_file import write_atomic
from ..files.private_path import PRIVATE_FILE
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


def executable(relative: str) -> bool:
    return relative.endswith((".sh", ".sbatch"))


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Each file atomically, the owner's alone: scripts 0700 (they hold paths), the rest
    0600 (the topology its settings)."""
    written = []
    for relative, text in sorted(files.items()):
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o700 if executable(relative) else PRIVATE_FILE
        write_atomic(path, text, mode)
        path.chmod(mode)
        written.append(path)
    return written
