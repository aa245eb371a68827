"""`validate`, `render`, `schema`, `init`: commands that read topologies and start nothing."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from ..errors import UserInputError
from ..inputs.options import Command

if TYPE_CHECKING:
    from ..render.request import InitRequest, RenderRequest, SchemaRequest, ValidateRequest

console = Console(highlight=False, soft_wrap=True)


def validate(request: ValidateRequest) -> None:
    """Check topology files (schema, parallelism, GPU budget, memory, ports). Starts nothing."""
    from ..inputs.yaml_input import load_model_file
    from ..placements.registry import PLACEMENTS
    from ..render.cluster_plan import checkpoint_warning
    from ..topology import Topology

    for path in request.files:
        topo = load_model_file(Topology, path)
        pools = ", ".join(f"{role.value} {pool.workers}x TP{pool.tensor_parallel}"
                          for role, pool in topo.active_pools())
        console.print(f"ok {path}: {topo.name} ({topo.backend.value}, {topo.mode.value}: "
                      f"{pools}; {topo.total_gpus}/{topo.hardware.total_gpus} GPUs)",
                      markup=False)
        if topo.version_note:
            console.print(f"note: {path}: {topo.version_note}", markup=False)
        warnings = [w for placement in PLACEMENTS for w in placement.validate_warnings(topo)]
        for warning in [*warnings, checkpoint_warning(topo)]:
            if warning is not None:
                console.print(f"warning: {warning}", markup=False)
        if topo.placement.kind.multi_node:
            _print_placement(topo)
        for note in (n for placement in PLACEMENTS for n in placement.validate_notes(topo)):
            console.print(note, markup=False)
        # The same warnings `up` prints, before anyone starts the graph.
        from ..launch.preflight import exposure_warnings

        for warning in exposure_warnings(topo):
            console.print(f"warning: {warning}", markup=False)


def _print_placement(topo) -> None:  # Topology
    from rich.table import Table

    from ..render.node_layout import node_layout, placement_warnings

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


def render(request: RenderRequest) -> None:
    """Write the graph as local launch files and/or a Kubernetes DynamoGraphDeployment."""
    from ..inputs.yaml_input import load_model_file
    from ..placements.files import write_rendered
    from ..placements.registry import check_target_name
    from ..topology import Topology

    check_target_name(request.target)
    topo = load_model_file(Topology, request.file)
    outcome = write_rendered(topo, request.target, request.out.resolve(),
                             source=str(request.file))
    for line in outcome.written:
        console.print(f"wrote {line}", markup=False)
    for line in outcome.removed:
        console.print(f"removed {line} (no longer rendered)", markup=False)
    for warning in outcome.warnings:
        console.print(f"note: {warning}", markup=False)
    for step in outcome.first_steps:
        console.print(f"first: {step}", markup=False)
    for step in outcome.next_steps:
        console.print(f"next: {step}", markup=False)


def schema(request: SchemaRequest) -> None:
    """Print the topology JSON Schema (point your editor's YAML support at it)."""
    if request.markdown:
        from ..render.schema_reference import topology_reference

        typer.echo(topology_reference(), nl=False)
        return
    from ..topology import Topology

    typer.echo(json.dumps(Topology.model_json_schema(), indent=2))


def init(request: InitRequest) -> None:
    """Write a commented starter topology."""
    from ..builtin import STARTER_TOPOLOGY

    file = request.file
    if file.exists() and not request.force:
        raise UserInputError("file exists", source=str(file),
                             fix="choose another path or pass --force")
    file.write_text(STARTER_TOPOLOGY.read_text())
    console.print(f"wrote {file}; next: dis-serve validate {file}", markup=False)


COMMANDS = (Command(validate, ("dis_serve.render.request:ValidateRequest",)),
            Command(render, ("dis_serve.render.request:RenderRequest",)),
            Command(schema, ("dis_serve.render.request:SchemaRequest",)),
            Command(init, ("dis_serve.render.request:InitRequest",)))
