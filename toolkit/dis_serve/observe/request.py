"""What `top` is asked for: each field a flag of the command (inputs/options), its description
the flag's help."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..inputs.options import CliFlag, OptionProblem
from ..inputs.request_model import RequestModel
from ..inputs.urls import FrontendUrl


class TopRequest(RequestModel):
    """Which graph to watch (ours by name, or any frontend by URL), and how."""

    name: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description="Graph to watch, on this machine or on Slurm or hosts nodes "
                                  "(default: the only one running in the run directory).")
    url: FrontendUrl | None = Field(
        default=None, description="Watch the graph whose frontend is at this URL instead "
                                  "(pools from its router; no worker-side figures).")
    once: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="Print one frame (two scrapes a window apart) and exit.")
    window: float = Field(default=5.0, ge=0.5, le=600,
                          description="Seconds the rates and latencies cover.")
    as_json: Annotated[bool, CliFlag("--json", negatable=False)] = Field(
        default=False, description="With `once`: the frame as JSON.")

    @model_validator(mode="after")
    def _check(self) -> TopRequest:
        if self.name is not None and self.url is not None:
            raise OptionProblem("give a graph NAME or `url`, not both", field="url",
                                fix="dis-serve top NAME, or dis-serve top `url` URL")
        if self.as_json and not self.once:
            raise OptionProblem("`as_json` prints one frame", field="as_json",
                                fix="add `once`")
        return self
