"""Placement slurm: one sbatch job for the whole graph, an agent per node as a step of it.
Renders `slurm/` (the batch script, engine configs, Prometheus files, the graph's CA) and
opens `SlurmHandle` (`up` submits the job)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...topology import PlacementKind
from ..base import RenderedTarget
from ..cluster import rendering

if TYPE_CHECKING:
    from ...launch.run_record import RunRecord
    from ...launch.rundir import RunDir
    from ...topology import Topology
    from .handle import SlurmHandle


class SlurmPlacement:
    target = "slurm"
    kind = PlacementKind.SLURM

    def rendered_by_all(self, topo: Topology) -> bool:
        return rendering.rendered_by_all(topo)

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        from ..shared_files import engine_config_files
        from .sbatch import render_sbatch_script, render_slurm_plan

        files = {"slurm/job.sbatch": render_sbatch_script(topo),
                 **engine_config_files(topo, self.target)}
        return RenderedTarget(
            files=files,
            observability=rendering.cluster_observability(self.target,
                                                          render_slurm_plan(topo)),
            write_secrets=rendering.ca_writer(topo, self.target),
            next_steps=[f"cd {out_dir / self.target} && sbatch job.sbatch (or dis-serve up "
                        f"{source} with placement: slurm)"])

    def check_renderable(self, topo: Topology, source: str | None) -> None:
        return None

    def validate_warnings(self, topo: Topology) -> list[str]:
        return []

    def validate_notes(self, topo: Topology) -> list[str]:
        return []

    def topology_section(self, nodes: int) -> dict:
        """`placement:` of a planned topology on `nodes` nodes of one job."""
        return {"slurm": {"nodes": nodes}}

    def open(self, run: RunDir, topo: Topology) -> SlurmHandle:
        from .handle import SlurmHandle

        return SlurmHandle(run, topo)

    def reopen(self, run: RunDir, record: RunRecord | None) -> SlurmHandle:
        from .handle import SlurmHandle
        from .queue import read_job

        return SlurmHandle(run, record=record, job=read_job(run))

    def made_legacy_run(self, run: RunDir) -> bool:
        """An earlier dis-serve kept a Slurm job's id in `slurm-job.json`."""
        from .queue import read_job

        return read_job(run) is not None


SLURM = SlurmPlacement()
