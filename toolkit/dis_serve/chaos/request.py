"""What `chaos` and `fault` are asked for: each field a flag of its command (inputs/options),
its description the flag's help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, model_validator

from ..inputs.options import CliFlag, OptionProblem
from ..inputs.request_model import RequestModel
from .scenario import FaultAction


class ChaosRequest(RequestModel):
    """One chaos run: a graph brought up here, a scenario of faults, where the results go."""

    topology: Annotated[Path | None, CliFlag(argument=True)] = Field(
        default=None, description="Topology to bring up and hurt (default: the demo graph).")
    scenario: Path = Field(description="Chaos scenario YAML (benchmarks/chaos-demo.yaml).")
    out: Path | None = Field(default=None, description="Output directory (default "
                                                       ".dis-serve/chaos/<topology>-<scenario>).")


class FaultRequest(RequestModel):
    """One fault on a running graph, now."""

    name: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description="Graph name (default: the only running graph).")
    process: str | None = Field(
        default=None, description="The process to hit (default with `node`: every process "
                                  "of the node and its agent).")
    node: str | None = Field(
        default=None, description="The node (as `status` names it) of a Slurm or hosts graph.")
    action: FaultAction = Field(
        default=FaultAction.KILL,
        description="kill: SIGKILL (a crash), term: SIGTERM, pause: SIGSTOP for `duration`, "
                    "then SIGCONT (a hung process or node).")
    duration: float | None = Field(default=None, ge=0.1, le=600,
                                   description="pause only: seconds it stays stopped.")

    @model_validator(mode="after")
    def _pause_has_a_duration(self) -> FaultRequest:
        if (self.action is FaultAction.PAUSE) != (self.duration is not None):
            raise OptionProblem("`duration` goes with `action` pause and only with it",
                                field="duration", fix="give both, or neither")
        return self
