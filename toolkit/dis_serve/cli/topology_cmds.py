"""`validate`, `render`, `schema`, `init`: commands that read topologies and start nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..errors import UserInputError

if TYPE_CHECKING:
    from ..render.target_files import Target
    from ..topology import Topology

console = Console(highlight=False, soft_wrap=True)


def validate(
    files: Annotated[list[Path], typer.Argument(help="Topology YAML files.")],
) -> None:
    """Check topology files (schema, parallelism, GPU budget, memory, ports). Starts nothing."""
    from ..render.cluster_plan import checkpoint_warning
    from ..render.k8s import platform_note
    from ..render.model_cache import claim_check, unpinned_revision_warning
    from ..topology import Topology
    from ..yaml_input import load_model_file

    for path in files:
        topo = load_model_file(Topology, path)
        problem, summary = claim_check(topo)
        if problem is not None:
            raise UserInputError(problem, source=str(path))
        pools = ", ".join(f"{role.value} {pool.workers}x TP{pool.tensor_parallel}"
                          for role, pool in topo.active_pools())
        console.print(f"ok {path}: {topo.name} ({topo.backend.value}, {topo.mode.value}: "
                      f"{pools}; {topo.total_gpus}/{topo.hardware.total_gpus} GPUs)",
                      markup=False)
        if topo.version_note:
            console.print(f"note: {path}: {topo.version_note}", markup=False)
        for warning in (unpinned_revision_warning(topo), checkpoint_warning(topo)):
            if warning is not None:
                console.print(f"warning: {warning}", markup=False)
        if topo.placement.kind.multi_node:
            _print_placement(topo)
        if summary is not None:
            console.print(f"kubernetes model cache: {summary}", markup=False)
        console.print(f"kubernetes platform: {platform_note(topo)}", markup=False)
        # The same warnings `up` prints, before anyone starts the graph.
        from ..launch.preflight import exposure_warnings

        for warning in exposure_warnings(topo):
            console.print(f"warning: {warning}", markup=False)


def _print_placement(topo) -> None:  # Topology
    from rich.table import Table

    from ..placement import node_layout, placement_warnings

    table = Table(title=f"placement: {topo.placement.kind.value}", title_justify="left")
    for column in ("node", "address", "GPUs", "processes"):
        table.add_column(column)
    for node in node_layout(topo):
        used = sum(len(w.gpus) for w in node.workers)
        table.add_row(node.name + (" (head)" if node.head else ""),
                      node.address or "resolved at run time", f"{used}/{node.gpus}",
                      ", ".join(node.processes) or "-")
    console.print(table)
    for warning in placement_warnings(topo):
        console.print(f"warning: {warning}", markup=False)


def render(
    file: Annotated[Path, typer.Argument(help="Topology YAML file.")],
    target: Annotated[str, typer.Option(help="local | k8s | hosts | slurm | all.")] = "all",
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("rendered"),
) -> None:
    """Write the graph as local launch files and/or a Kubernetes DynamoGraphDeployment."""
    from ..render.target_files import Target, render_target, write_files
    from ..topology import Topology
    from ..yaml_input import load_model_file

    try:
        chosen = Target(target)
    except ValueError:
        raise UserInputError(f"unknown target {target!r}", key="--target",
                             fix="use local, k8s, hosts, slurm or all") from None
    topo = load_model_file(Topology, file)
    out_dir = out.resolve()
    result = render_target(topo, chosen, out_dir, source=str(file))
    files = result.files | _observability_files(result.files, topo, chosen)
    for path in write_files(files, out_dir):
        console.print(f"wrote {path}", markup=False)
    for path in _write_cluster_cas(topo, chosen, out_dir):
        console.print(f"wrote {path} (the graph's CA and client certificate, keys 0600)",
                      markup=False)
    for warning in result.warnings:
        console.print(f"note: {warning}", markup=False)
    for step in result.first_steps:
        console.print(f"first: {step}", markup=False)
    if chosen.includes(Target.K8S):
        from ..render.k8s_monitor import OPTIONAL_FILE, pod_monitor_file

        console.print(f"next: kubectl apply -f {out_dir / 'k8s'}", markup=False)
        if pod_monitor_file(topo) == OPTIONAL_FILE:
            console.print(f"next: kubectl apply -f {(out_dir / OPTIONAL_FILE).parent} (where "
                          "a Prometheus Operator runs: the graph's metrics)", markup=False)
    if chosen.wanted(Target.HOSTS, topo):
        console.print(f"next: copy {out_dir / 'hosts'} to every node and follow its "
                      "README.md", markup=False)
    if chosen.wanted(Target.SLURM, topo):
        console.print(f"next: cd {out_dir / 'slurm'} && sbatch job.sbatch (or dis-serve up "
                      f"{file} with placement: slurm)", markup=False)
    if chosen.includes(Target.LOCAL):
        console.print(f"next: dis-serve up {file}", markup=False)


def _write_cluster_cas(topo: Topology, chosen: Target, out_dir: Path) -> list[Path]:
    """Each cluster target's tls/ (security.tls.mode auto): a new CA, made here since the
    nodes may share no storage; each node's agent signs its own server certificate with it."""
    from ..launch.cluster_tls import write_cluster_ca
    from ..render.target_files import Target
    from ..security.pki_files import TLS_DIR
    from ..topology.security import TlsMode

    if topo.security.tls.mode is not TlsMode.AUTO:
        return []
    written = []
    for target in (Target.HOSTS, Target.SLURM):
        if chosen.wanted(target, topo):
            write_cluster_ca(topo, out_dir / target.value)
            written.append(out_dir / target.value / TLS_DIR)
    return written


def _observability_files(files: dict[str, str], topo: Topology,
                         chosen: Target) -> dict[str, str]:
    """Prometheus config and Grafana dashboards beside each rendered launch: the local plan's
    under local/observability (static targets); hosts' and Slurm's under <target>/observability
    (file-based discovery of targets/<node>.json, written once the nodes' addresses are known)."""
    from ..observe.cluster_targets import render_cluster_observability
    from ..observe.prometheus_config import render_observability
    from ..render.hosts import render_hosts_plan
    from ..render.launch_plan import LaunchPlan
    from ..render.slurm import render_slurm_plan
    from ..render.target_files import Target

    out: dict[str, str] = {}
    if chosen.includes(Target.LOCAL):
        plan = LaunchPlan.model_validate_json(files["local/launch-plan.json"])
        out |= {f"local/observability/{path}": text
                for path, text in render_observability(plan).items()}
    for target, cluster_plan in ((Target.HOSTS, render_hosts_plan),
                                 (Target.SLURM, render_slurm_plan)):
        if chosen.wanted(target, topo):
            out |= {f"{target.value}/observability/{path}": text
                    for path, text in render_cluster_observability(cluster_plan(topo)).items()}
    return out


def schema(
    markdown: Annotated[bool, typer.Option(
        "--markdown", help="Print the Markdown reference (docs/topology.md) instead: every "
                           "section, key, type, default and description.")] = False,
) -> None:
    """Print the topology JSON Schema (point your editor's YAML support at it)."""
    if markdown:
        from ..schema_reference import topology_reference

        typer.echo(topology_reference(), nl=False)
        return
    from ..topology import Topology

    typer.echo(json.dumps(Topology.model_json_schema(), indent=2))


def init(
    file: Annotated[Path, typer.Argument(help="Where to write the starter topology.")] = Path(
        "topology.yaml"),
    force: Annotated[bool, typer.Option(help="Overwrite an existing file.")] = False,
) -> None:
    """Write a commented starter topology."""
    from ..builtin import STARTER_TOPOLOGY

    if file.exists() and not force:
        raise UserInputError("file exists", source=str(file),
                             fix="choose another path or pass --force")
    file.write_text(STARTER_TOPOLOGY.read_text())
    console.print(f"wrote {file}; next: dis-serve validate {file}", markup=False)


def register(app: typer.Typer) -> None:
    for command in (validate, render, schema, init):
        app.command()(command)
