"""What the commands that read a topology and start nothing (`validate`, `render`, `schema`,
`init`) are asked for: each field a flag of its command (inputs/options), its description
the flag's help. Which render targets exist is the placement registry's to say (the command
checks `target` there)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ..inputs.options import CliFlag
from ..inputs.request_model import RequestModel


class ValidateRequest(RequestModel):
    """Topology files to check."""

    files: Annotated[tuple[Path, ...], CliFlag(argument=True)] = Field(
        min_length=1, description="Topology YAML files.")


class RenderRequest(RequestModel):
    """A topology's files for a placement (or every placement), and where they go."""

    file: Annotated[Path, CliFlag(argument=True)] = Field(description="Topology YAML file.")
    target: str = Field(default="all", description="Which placement's files to write, or all "
                                                   "(an unknown name lists the placements).")
    out: Path = Field(default=Path("rendered"), description="Output directory.")


class SchemaRequest(RequestModel):
    """The schema, as JSON Schema or as the Markdown reference."""

    markdown: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="Print the Markdown reference (docs/topology.md) instead: "
                                   "every section, key, type, default and description.")


class InitRequest(RequestModel):
    """Where the starter topology goes."""

    file: Annotated[Path, CliFlag(argument=True)] = Field(
        default=Path("topology.yaml"), description="Where to write the starter topology.")
    force: bool = Field(default=False, description="Overwrite an existing file.")
