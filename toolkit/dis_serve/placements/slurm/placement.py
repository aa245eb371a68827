"""Placement slurm: one sbatch job for the whole graph, an agent per node as a step of it.
Renders `slurm/` (the batch script, engine configs, Prometheus files, the graph's CA) and
opens `SlurmHandle` (`up` submits the job)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...topology import PlacementKind
from ..base import PlacementDefaults, RenderedTarget
from ..cluster import rendering

if TYPE_CHECKING:
    from ...launch.run_record import RunRecord
    from ...launch.rundir import RunDir
    from ...topology import Topology
    from .handle import SlurmHandle


class SlurmPlacement(PlacementDefaults):
    target = "slurm"
    kind = PlacementKind.SLURM

    def rendered_by_all(self, topo: Topology) -> bool:
        return rendering.rendered_by_all(topo)

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        """What `up` writes into a run directory (slurm_run_files, write_inputs), with the
        nodes' own `python3`, under out_dir/slurm: `sbatch job.sbatch` there runs it."""
        from .sbatch import SCRIPT_FILE, slurm_run_files

        made = slurm_run_files(topo, rendering.RunContext())
        here = out_dir / self.target
        return RenderedTarget(
            files=rendering.under(self.target, made.files),
            observability=rendering.cluster_observability(self.target, made.plan),
            write_inputs=lambda out: rendering.write_inputs(topo, made.plan, out / self.target,
                                                             model_card=False),
            next_steps=[f"cd {here} && sbatch {SCRIPT_FILE} (or dis-serve up {source} with "
                        "placement: slurm)"])

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
