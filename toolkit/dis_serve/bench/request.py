"""What `bench` and `compare` are asked for: each field a flag of its command (inputs/options),
its description the flag's help; the rules between fields are the models' own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from ..inputs.options import CliFlag, OptionProblem
from ..inputs.request_model import RequestModel
from ..inputs.urls import FrontendUrl

OUT_HELP = ("Output directory; rerunning into the same one resumes the sweep (default "
            ".dis-serve/{}).")
SCENARIO_HELP = "Scenario YAML (benchmarks/smoke.yaml, chat.yaml, long-prompt.yaml)."
TOKENIZER_HELP = ("Tokenizer AIPerf counts tokens with (default: the graph's model directory "
                  "or id).")


class BenchRequest(RequestModel):
    """One sweep of a graph: brought up here (a topology) or already running (`url`), with
    the CI gate against a baseline."""

    topology: Annotated[Path | None, CliFlag(argument=True)] = Field(
        default=None, description="Topology to bring up, benchmark and stop (default: the "
                                  "demo graph).")
    scenario: Path = Field(description=SCENARIO_HELP)
    url: FrontendUrl | None = Field(
        default=None, description="Benchmark the graph already running at this URL instead.")
    running_topology: Annotated[Path | None, CliFlag("--topology")] = Field(
        default=None, description="The topology that graph runs: GPU count, model, metrics "
                                  "ports (default: the demo graph).")
    out: Path | None = Field(default=None,
                             description=OUT_HELP.format("bench/<topology>-<scenario>"))
    baseline: Path | None = Field(
        default=None, description="Gate: a results.json to compare against "
                                  "(benchmarks/baselines/).")
    max_regression: float | None = Field(
        default=None, description="Gate: fail (exit 1) when a metric is this many percent "
                                  "worse.")
    write_baseline: Path | None = Field(
        default=None, description="Also save the results as a baseline file.")
    tokenizer: str | None = Field(default=None, description=TOKENIZER_HELP)

    @field_validator("max_regression")
    @classmethod
    def _not_negative(cls, value: float | None) -> float | None:
        if value is not None and value < 0:
            raise OptionProblem(f"{value:g} is negative",
                                fix="give the allowed regression in percent, e.g. 20")
        return value

    @model_validator(mode="after")
    def _check(self) -> BenchRequest:
        if (self.baseline is None) != (self.max_regression is None):
            raise OptionProblem(
                "`baseline` and `max_regression` go together",
                field="baseline" if self.baseline is None else "max_regression",
                fix="give both, e.g. `baseline` B.json `max_regression` 20")
        if (self.topology is not None and self.running_topology is not None
                and self.topology != self.running_topology):
            raise OptionProblem(f"two topologies given ({self.topology} and "
                                f"`running_topology` {self.running_topology})",
                                field="running_topology", fix="give one")
        return self

    @property
    def topology_file(self) -> Path | None:
        """The topology the sweep reads (None: the demo graph)."""
        return self.topology or self.running_topology


class CompareRequest(RequestModel):
    """One scenario on several arms (two topologies, or one varied in one key), one after
    the other, side by side."""

    a: Annotated[Path, CliFlag(argument=True)] = Field(
        description="Topology A (e.g. graphs/agg-mocker.yaml).")
    b: Annotated[Path | None, CliFlag(argument=True)] = Field(
        default=None, description="Topology B (e.g. graphs/demo.yaml); leave out with "
                                  "`vary`.")
    scenario: Path = Field(description=SCENARIO_HELP)
    vary: str | None = Field(
        default=None, description="Arms from one topology differing in one key, e.g. "
                                  "router.mode=kv,round-robin.")
    repeat: int = Field(default=1, ge=1, le=20,
                        description="Runs per arm, for the run-to-run spread.")
    out: Path | None = Field(
        default=None, description="Output directory (default .dis-serve/compare/"
                                  "<arms>-<scenario>).")
    tokenizer: str | None = Field(default=None, description=TOKENIZER_HELP)

    @model_validator(mode="after")
    def _check(self) -> CompareRequest:
        if (self.vary is None) == (self.b is None):
            raise OptionProblem("give two topologies, or one topology and `vary`",
                                field="vary", fix="e.g. compare graphs/agg-mocker.yaml "
                                                  "`vary` router.mode=kv,round-robin")
        return self


class DiffRequest(RequestModel):
    """Two runs to tell apart."""

    run_a: Annotated[Path, CliFlag(argument=True)] = Field(
        description="An output directory of bench, compare, chaos or plan (holds "
                    "fingerprint.json).")
    run_b: Annotated[Path, CliFlag(argument=True)] = Field(
        description="The directory to compare it with.")
