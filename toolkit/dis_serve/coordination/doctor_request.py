"""What `doctor` is asked for: each field a flag of the command (inputs/options), its
description the flag's help. Which graph a name means is the command's to find out (a run
directory); the rules between flags are here."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from ..inputs.options import CliFlag, OptionProblem
from ..inputs.request_model import RequestModel
from ..inputs.urls import HttpUrl, NatsUrl


class DoctorRequest(RequestModel):
    """A graph of ours by name (or the only running one), or any Dynamo deployment by its
    URLs; one report, reports on a refresh, or the cleanup of a crashed graph's keys."""

    name: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description="Graph name (default: the only running graph).")
    etcd: HttpUrl | None = Field(
        default=None, description="etcd client URL of any Dynamo deployment (with "
                                  "`namespace`).")
    nats: NatsUrl | None = Field(default=None, description="Its NATS URL.")
    namespace: str | None = Field(default=None, description="Its Dynamo namespace.")
    frontend: HttpUrl | None = Field(
        default=None, description="Its frontend URL (Prometheus at URL/metrics).")
    metrics: tuple[HttpUrl, ...] = Field(
        default=(), description="A worker's metrics URL (repeat for each).")
    window: float = Field(default=3.0, ge=0.1, le=60,
                          description="Seconds to listen to the namespace's NATS subjects.")
    as_json: Annotated[bool, CliFlag("--json", negatable=False)] = Field(
        default=False, description="Print the report as JSON.")
    watch: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="Refresh until Ctrl-C (or `count` reports); exit with the "
                                   "last report's code.")
    interval: float = Field(default=5.0, ge=0.5,
                            description="Seconds between `watch` refreshes.")
    count: int | None = Field(default=None, ge=1,
                              description="With `watch`: stop after this many reports.")
    clean: Annotated[str | None, CliFlag(metavar="NS")] = Field(
        default=None, description="Delete namespace NS's etcd keys and JetStream streams (a "
                                  "crashed graph's leftovers), after showing them.")
    yes: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="`clean` without asking.")

    @model_validator(mode="after")
    def _check(self) -> DoctorRequest:
        if self.watch and self.as_json:
            raise OptionProblem("`watch` and `as_json` do not go together", field="watch",
                                fix="use one")
        if self.count is not None and not self.watch:
            raise OptionProblem("`count` bounds `watch`, which was not given", field="count",
                                fix="add `watch`, or drop `count`")
        if self.clean is not None and self.name is None and self.etcd is None:
            raise OptionProblem("`clean` needs the etcd that holds the namespace",
                                field="clean", fix="add `etcd` URL (and `nats` URL), or a "
                                                   "graph name")
        return self
