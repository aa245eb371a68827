"""What `scale`, `apply` and the planner's scaler (`autoscaler`) are asked for: each field a
flag of its command (inputs/options), its description the flag's help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ..inputs.options import CliFlag
from ..inputs.request_model import RequestModel


class ScaleRequest(RequestModel):
    """A running graph and its pools' new worker counts."""

    name: Annotated[str, CliFlag(argument=True)] = Field(
        description="The running graph (`dis-serve status` lists them).")
    pools: Annotated[tuple[str, ...], CliFlag(argument=True, metavar="POOL=N")] = Field(
        description="A pool's worker count now, e.g. decode=3 (several at once).")


class ApplyRequest(RequestModel):
    """An edited topology of a running graph (or of one Dynamo's operator runs)."""

    file: Annotated[Path, CliFlag(argument=True)] = Field(
        description="The edited topology of a running graph.")
    dry_run: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="Print what would change, and the steps, and change "
                                   "nothing.")
    deployed: Path | None = Field(
        default=None, description="A graph Dynamo's operator runs: the topology its deployed "
                                  "DynamoGraphDeployment was rendered from. Writes the change "
                                  "for kubectl under --out instead (a replicas patch, or the "
                                  "new DGD the operator rolls).")
    out: Path = Field(default=Path("operator-change"),
                      description="Where --deployed writes the change.")


class AutoscalerRequest(RequestModel):
    """The graph whose planner's decisions to carry out."""

    run_dir: Annotated[Path, CliFlag(argument=True)] = Field(
        description="The graph's run directory.")
