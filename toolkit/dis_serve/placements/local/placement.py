"""Placement local: every process on this machine under one supervisor (`up`, in this
process or detached). Renders `local/` (the launch plan, a bash script that runs it, the
engine configs, Prometheus and Grafana files) and opens `LocalHandle`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...topology import PlacementKind
from ..base import PlacementDefaults, RenderedTarget

if TYPE_CHECKING:
    from ...launch.run_record import RunRecord
    from ...launch.rundir import RunDir
    from ...topology import Topology
    from .handle import LocalHandle


class LocalPlacement(PlacementDefaults):
    target = "local"
    kind = PlacementKind.LOCAL

    def rendered_by_all(self, topo: Topology) -> bool:
        return True

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        """Paths inside the plan point into out_dir/local, so the script runs as written."""
        from ...launch.node_configs import local_balancer_files
        from ...launch.startup_budget import readiness_timeout_s
        from ...observe.prometheus_config import render_observability
        from ...render.launch_plan import RenderContext, render_launch_plan
        from ...render.shell_script import render_shell_script
        from ..shared_files import engine_config_files

        plan = render_launch_plan(topo, RenderContext(run_dir=out_dir / self.target))
        files = {"local/launch-plan.json": plan.model_dump_json(indent=2) + "\n",
                 "local/launch.sh": render_shell_script(
                     plan, ready_timeout_s=readiness_timeout_s(topo)),
                 **engine_config_files(topo, self.target),
                 # The balancer's files, which `up` writes into the run directory itself.
                 **{f"local/{name}": text for name, text in local_balancer_files(
                     topo, plan, out_dir / self.target).items()}}
        observability = {f"local/observability/{path}": text
                         for path, text in render_observability(plan).items()}
        return RenderedTarget(files=files, observability=observability,
                              next_steps=[f"dis-serve up {source}"])

    def topology_section(self, nodes: int) -> dict:
        """`placement:` of a planned topology on this machine: none (the default)."""
        return {}

    def open(self, run: RunDir, topo: Topology) -> LocalHandle:
        from .handle import LocalHandle

        return LocalHandle(run, topo)

    def reopen(self, run: RunDir, record: RunRecord | None) -> LocalHandle:
        from .handle import LocalHandle

        return LocalHandle(run, record=record)

    def made_legacy_run(self, run: RunDir) -> bool:
        return True  # what the others do not claim: a supervisor's state, or nothing yet


LOCAL = LocalPlacement()
