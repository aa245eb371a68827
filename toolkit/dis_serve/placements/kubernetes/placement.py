"""Placement Kubernetes: Dynamo's operator runs the graph from a DynamoGraphDeployment.
Renders `k8s/` (the deployment with its ConfigMaps, model cache, NetworkPolicy and TLS, the
Secrets dis-serve issues, the PodMonitors for a Prometheus Operator). No handle: `kubectl` and
the operator own the run."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from ...errors import UserInputError
from ..base import RenderedTarget

if TYPE_CHECKING:
    from ...launch.run_record import RunRecord
    from ...launch.rundir import RunDir
    from ...topology import Topology
    from .apply import OperatorChange


class KubernetesPlacement:
    target = "k8s"
    kind = None  # rendered for every topology from its `kubernetes` section

    def rendered_by_all(self, topo: Topology) -> bool:
        return True

    def render_change(self, deployed: Topology, edited: Topology, source: str,
                      out_dir: str) -> OperatorChange:
        """A change of the deployed graph, for kubectl (apply.py)."""
        from .apply import kubernetes_change

        return kubernetes_change(deployed, edited, source, out_dir)

    def render(self, topo: Topology, out_dir: Path, source: str | None) -> RenderedTarget:
        """`kubectl apply -f k8s/` applies everything the graph needs; its PodMonitors lie in
        k8s/monitoring/ unless its planner reads them (monitor.py)."""
        from .dump import dump_manifests
        from .manifests import apply_prerequisites, apply_warnings, operator_notes, render_manifests
        from .monitor import OPTIONAL_FILE, monitor_notes, pod_monitor_file, render_pod_monitors
        from .secrets import uses_own_secrets, write_tls_secrets

        here = out_dir / self.target
        files = {
            "k8s/deployment.yaml": dump_manifests(render_manifests(topo), operator_notes(topo)),
            pod_monitor_file(topo): dump_manifests(
                render_pod_monitors(topo), monitor_notes(topo),
                heading="The graph's PodMonitors, for a Prometheus Operator:")}
        steps = [f"kubectl apply -f {here}"]
        if pod_monitor_file(topo) == OPTIONAL_FILE:
            steps.append(f"kubectl apply -f {(out_dir / OPTIONAL_FILE).parent} (where a "
                         "Prometheus Operator runs: the graph's metrics)")
        return RenderedTarget(
            files=files, warnings=apply_warnings(topo), first_steps=apply_prerequisites(topo),
            next_steps=steps,
            write_inputs=(lambda out: write_tls_secrets(topo, out))
            if uses_own_secrets(topo) else None)

    def check_renderable(self, topo: Topology, source: str | None) -> None:
        """A model on this machine's disk cannot reach a pod."""
        from .model_cache import local_path_problem

        if (problem := local_path_problem(topo)) is not None:
            raise UserInputError(problem, source=source, key="model.id")

    def validate_warnings(self, topo: Topology) -> list[str]:
        from .model_cache import unpinned_revision_warning

        warning = unpinned_revision_warning(topo)
        return [] if warning is None else [warning]

    def validate_notes(self, topo: Topology) -> list[str]:
        """What the model cache holds, and which Dynamo platform the pods are made for."""
        from .manifests import platform_note
        from .model_cache import claim_summary

        notes = [f"kubernetes platform: {platform_note(topo)}"]
        if (summary := claim_summary(topo)) is not None:
            notes.insert(0, f"kubernetes model cache: {summary}")
        return notes

    def topology_section(self, nodes: int) -> dict:
        """A topology names no Kubernetes placement: it is rendered from `kubernetes:`."""
        return {}

    def open(self, run: RunDir, topo: Topology) -> NoReturn:
        raise UserInputError("Kubernetes graphs are started by Dynamo's operator, not by "
                             "dis-serve", key="--target",
                             fix=f"dis-serve render --target {self.target}, then kubectl apply")

    def reopen(self, run: RunDir, record: RunRecord | None) -> NoReturn:
        return self.open(run, None)  # type: ignore[arg-type]

    def made_legacy_run(self, run: RunDir) -> bool:
        return False


KUBERNETES = KubernetesPlacement()
