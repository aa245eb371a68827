"""Placement hosts: machines people start one script on each (`node-<name>.sh`), whose
agents run the graph. Renders `hosts/` (the scripts, README, cluster plan, topology, engine
configs, Prometheus files, the graph's CA) and opens `HostsHandle`."""

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
    from .handle import HostsHandle


class HostsPlacement(PlacementDefaults):
    target = "hosts"
    kind = PlacementKind.HOSTS

    def rendered_by_all(self, topo: Topology) -> bool:
        return rendering.rendered_by_all(topo)

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        """What `prepare` writes into a run directory (hosts_run_files, write_inputs),
        under out_dir/hosts, and Prometheus's file discovery of the nodes beside it."""
        from .scripts import hosts_run_files

        made = hosts_run_files(topo)
        here = out_dir / self.target
        return RenderedTarget(
            files=rendering.under(self.target, made.files),
            observability=rendering.cluster_observability(self.target, made.plan),
            write_inputs=lambda out: rendering.write_inputs(topo, made.plan, out / self.target,
                                                             model_card=False),
            next_steps=[f"copy {here} to every node and follow its README.md"])

    def topology_section(self, nodes: int) -> dict:
        """`placement:` of a planned topology on `nodes` machines: each named for its index
        and addressed by that name until the user puts in the real address (a name the
        cluster's DNS may well resolve)."""
        return {"hosts": {"nodes": [{"name": f"node{n}", "address": f"node{n}"}
                                    for n in range(nodes)]}}

    def open(self, run: RunDir, topo: Topology) -> HostsHandle:
        from .handle import HostsHandle

        return HostsHandle(run, topo)

    def reopen(self, run: RunDir, record: RunRecord | None) -> HostsHandle:
        from .handle import HostsHandle

        return HostsHandle(run, record=record)

    def made_legacy_run(self, run: RunDir) -> bool:
        """`prepare` wrote a cluster plan; a Slurm run has a job file, a local one a plan."""
        return (run.cluster_plan_file.is_file() and not run.plan_file.is_file()
                and not run.slurm_job_file.is_file())


HOSTS = HostsPlacement()
