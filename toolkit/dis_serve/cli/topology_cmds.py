"""`validate`, `render`, `schema`, `init`: commands that read topologies and start nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..errors import UserInputError

console = Console(highlight=False, soft_wrap=True)


def validate(
    files: Annotated[list[Path], typer.Argument(help="Topology YAML files.")],
) -> None:
    """Check topology files (schema, parallelism, GPU budget, memory, ports). Starts nothing."""
    from ..render.cluster_plan import checkpoint_warning
    from ..render.model_cache import unpinned_revision_warning
    from ..topology import Topology
    from ..yaml_input import load_model_file

    for path in files:
        topo = load_model_file(Topology, path)
        pools = ", ".join(f"{role.value} {pool.workers}x TP{pool.tensor_parallel}"
                          for role, pool in topo.active_pools())
        console.print(f"ok {path}: {topo.name} ({topo.backend.value}, {topo.mode.value}: "
                      f"{pools}; {topo.total_gpus}/{topo.hardware.total_gpus} GPUs)",
                      markup=False)
        for warning in (unpinned_revision_warning(topo), checkpoint_warning(topo)):
            if warning is not None:
                console.print(f"warning: {warning}", markup=False)
        if topo.placement.kind.multi_node:
            _print_placement(topo)


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
    from ..render.target_files import Target, render_files, write_files
    from ..topology import Topology
    from ..yaml_input import load_model_file

    try:
        chosen = Target(target)
    except ValueError:
        raise UserInputError(f"unknown target {target!r}", key="--target",
                             fix="use local, k8s, hosts, slurm or all") from None
    topo = load_model_file(Topology, file)
    if chosen.includes(Target.K8S):
        from ..render.model_cache import local_path_problem

        if (problem := local_path_problem(topo)) is not None:
            raise UserInputError(problem, source=str(file), key="model.id")
    out_dir = out.resolve()
    for path in write_files(render_files(topo, chosen, out_dir), out_dir):
        console.print(f"wrote {path}", markup=False)
    if chosen.includes(Target.K8S):
        from ..catalog import KNOWN_MODELS

        if topo.model.id == KNOWN_MODELS["dis-serve-tiny"].hf_id:
            console.print(f"note: {topo.model.id} is dis-serve's local tokenizer-only card, "
                          "which a cluster cannot download; set model.id to a real Hugging Face "
                          "id before applying the manifest", markup=False)
        _print_k8s_prerequisites(topo)
        console.print(f"next: kubectl apply -f {out_dir / 'k8s' / 'deployment.yaml'}",
                      markup=False)
    if chosen.wanted(Target.HOSTS, topo):
        console.print(f"next: copy {out_dir / 'hosts'} to every node and follow its "
                      "README.md", markup=False)
    if chosen.wanted(Target.SLURM, topo):
        console.print(f"next: cd {out_dir / 'slurm'} && sbatch job.sbatch (or dis-serve up "
                      f"{file} with placement: slurm)", markup=False)
    if chosen.includes(Target.LOCAL):
        console.print(f"next: dis-serve up {file}", markup=False)


def _print_k8s_prerequisites(topo) -> None:
    """What must exist in the cluster before `kubectl apply`, as commands."""
    kube = topo.kubernetes
    namespace = f"-n {kube.namespace}"
    console.print(f"first: kubectl create namespace {kube.namespace} (if it does not exist)",
                  markup=False)
    if not kube.model_cache.existing:
        console.print(f"first: kubectl create secret generic {kube.model_cache.hf_token_secret} "
                      f"{namespace} --from-literal=HF_TOKEN=<your Hugging Face token>",
                      markup=False)
    if topo.router.policy_config:
        from ..render.k8s import router_policy_map_name

        console.print(f"first: kubectl create configmap {router_policy_map_name(topo)} "
                      f"{namespace} --from-file=policy.yaml={topo.router.policy_config}",
                      markup=False)


def schema() -> None:
    """Print the topology JSON Schema (point your editor's YAML support at it)."""
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
