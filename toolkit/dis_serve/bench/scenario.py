"""The benchmark scenario schema: what load to offer a graph and what counts as good service.

A scenario is a YAML file the user writes (benchmarks/*.yaml), validated as strictly as a
topology. It names a workload (token length distributions), how long each sweep point runs,
the sweep itself (a list of concurrencies or request rates) and the SLA that defines goodput.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..topology import is_valid_name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class EndpointType(StrEnum):
    CHAT = "chat"
    COMPLETIONS = "completions"


class LoadKind(StrEnum):
    """How a sweep point offers load: a fixed number of requests in flight, or an arrival rate."""

    CONCURRENCY = "concurrency"
    REQUEST_RATE = "request_rate"

    @property
    def aiperf_flag(self) -> str:
        return {"concurrency": "--concurrency", "request_rate": "--request-rate"}[self.value]

    @property
    def label(self) -> str:
        return {"concurrency": "concurrency", "request_rate": "request rate (req/s)"}[self.value]


class TokenLengths(_Strict):
    """A normal distribution of token counts (AIPerf's synthetic prompt generator)."""

    mean: int = Field(gt=0, le=1_000_000, description="Mean length in tokens.")
    stddev: float = Field(
        default=0.0, ge=0, description="Standard deviation in tokens (0: every request the same).")


class Sla(_Strict):
    """The service level a request must meet to count towards goodput (DistServe's definition)."""

    ttft_ms: float = Field(gt=0, description="Time to first token must not exceed this, in ms.")
    itl_ms: float = Field(
        gt=0, description="Mean inter-token latency of the request must not exceed this, in ms.")


class SweepPoint(_Strict):
    """One load level of a sweep; AIPerf runs once per point."""

    kind: LoadKind
    value: float = Field(gt=0)

    @property
    def slug(self) -> str:
        """A file-name-safe name: concurrency-16, request_rate-2.5."""
        return f"{self.kind.value}-{self.display_value}"

    @property
    def display_value(self) -> str:
        return f"{self.value:g}"

    @property
    def aiperf_value(self) -> str:
        """The value after `kind.aiperf_flag`: concurrency is a whole number of requests."""
        return str(int(self.value)) if self.kind is LoadKind.CONCURRENCY else self.display_value

    @property
    def label(self) -> str:
        return f"{self.kind.value.replace('_', ' ')} {self.display_value}"


class Scenario(_Strict):
    """One benchmark: workload, duration of each point, the sweep, and the SLA."""

    name: str = Field(
        description="Scenario name (lower-case letters, digits, dashes); names the output "
                    "directory.")
    description: str | None = Field(default=None, description="What this scenario stands for.")
    endpoint_type: EndpointType = Field(
        default=EndpointType.CHAT, description="OpenAI API to call: chat | completions.")
    streaming: bool = Field(
        default=True, description="Stream tokens (needed for TTFT and ITL; keep it on).")
    input_tokens: TokenLengths = Field(description="Prompt length distribution.")
    output_tokens: TokenLengths = Field(description="Completion length distribution.")
    ignore_eos: bool = Field(
        default=True,
        description="Ask the server to generate exactly the requested output length "
                    "(sent as ignore_eos), so every point decodes the same number of tokens.")
    requests: int | None = Field(
        default=None, gt=0, le=10_000_000,
        description="Requests per sweep point (give this or duration_s).")
    duration_s: float | None = Field(
        default=None, gt=0, le=86_400,
        description="Seconds of load per sweep point (give this or requests).")
    concurrency: list[int] | None = Field(
        default=None, description="Concurrencies to sweep (give this or request_rate).")
    request_rate: list[float] | None = Field(
        default=None,
        description="Request rates to sweep, in requests/s with Poisson arrivals (give this or "
                    "concurrency).")
    warmup_requests: int = Field(
        default=0, ge=0, le=1_000_000,
        description="Requests sent before each point's measurement starts; excluded from results.")
    sla: Sla = Field(
        description="The SLA that defines goodput (measured when streaming: TTFT and ITL "
                    "exist only for streamed responses).")
    random_seed: int = Field(
        default=42, ge=0,
        description="Seed for AIPerf's synthetic prompts, so two runs send the same requests.")
    request_timeout_s: float = Field(
        default=600.0, gt=0, description="A request slower than this counts as an error.")
    point_timeout_s: float = Field(
        default=3600.0, gt=0,
        description="A sweep point still running after this long is stopped and the sweep fails.")

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        if not is_valid_name(self.name):
            raise ValueError(f"name {self.name[:60]!r} must be 2-40 lower-case letters, digits or "
                             "dashes, starting with a letter (it names a directory)")
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests (per point) and duration_s "
                             "(seconds per point)")
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency: [..] and request_rate: [..] "
                             "as the sweep")
        values: list[float] = list(self.concurrency or self.request_rate or [])
        key = "concurrency" if self.concurrency is not None else "request_rate"
        if not values:
            raise ValueError(f"{key} is empty; list at least one load level, e.g. [1, 4, 16]")
        if any(v <= 0 for v in values):
            raise ValueError(f"{key} values must be positive, got {values}")
        if len(set(values)) != len(values):
            raise ValueError(f"{key} lists a value twice: {values}; each point runs once")
        if (self.requests is not None and self.concurrency is not None
                and max(self.concurrency) > self.requests):
            raise ValueError(f"concurrency {max(self.concurrency)} is above requests "
                             f"({self.requests}); the point would never reach it; raise "
                             "requests or lower the concurrency")
        return self

    @property
    def load_kind(self) -> LoadKind:
        return LoadKind.CONCURRENCY if self.concurrency is not None else LoadKind.REQUEST_RATE

    def points(self) -> list[SweepPoint]:
        """The sweep in the order the user listed it."""
        values = self.concurrency if self.concurrency is not None else self.request_rate
        return [SweepPoint(kind=self.load_kind, value=float(v)) for v in values or []]


def load_scenario(path: Path) -> Scenario:
    from ..yaml_input import load_model_file

    return load_model_file(Scenario, path)
