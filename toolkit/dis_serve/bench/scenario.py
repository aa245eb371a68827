"""The benchmark scenario schema: what load to offer a graph and what counts as good service.

A scenario is a YAML file the user writes (benchmarks/*.yaml), validated as strictly as a
topology. It names a workload, how long each sweep point runs, the sweep itself and the SLA
that defines goodput. Workloads are all AIPerf's own datasets: synthetic prompts (mean and
spread of lengths), optionally with a pool of shared prefixes (RAG and agent traffic) or as
multi-turn chats, or a Mooncake-style trace replayed on its own timestamps, where the sweep
is the replay speed-up.
"""

from __future__ import annotations

import hashlib
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
    SPEEDUP = "speedup"

    @property
    def aiperf_flag(self) -> str:
        return {"concurrency": "--concurrency", "request_rate": "--request-rate",
                "speedup": "--synthesis-speedup-ratio"}[self.value]

    @property
    def label(self) -> str:
        return {"concurrency": "concurrency", "request_rate": "request rate (req/s)",
                "speedup": "trace speed-up (x)"}[self.value]


class CacheState(StrEnum):
    """The workers' prefix cache when a point's measurement began."""

    COLD = "cold"  # workers started (or restarted) right before the point
    WARM = "warm"  # earlier points or other traffic may have filled it


class TokenLengths(_Strict):
    """A normal distribution of token counts (AIPerf's synthetic prompt generator)."""

    mean: int = Field(gt=0, le=1_000_000, description="Mean length in tokens.")
    stddev: float = Field(
        default=0.0, ge=0, description="Standard deviation in tokens (0: every request the same).")


class SharedPrefix(_Strict):
    """Prompts that start with one of a few shared prefixes (system prompts, RAG documents,
    agent instructions): AIPerf's prefix-prompt pool."""

    ratio: float = Field(
        gt=0, lt=1, description="Fraction of each prompt (input_tokens.mean) that is the "
                                "shared prefix; the rest is unique to the request.")
    prefixes: int = Field(
        ge=1, le=100_000, description="Distinct prefixes; each request draws one at random.")

    def prefix_tokens(self, input_mean: int) -> int:
        return max(1, round(self.ratio * input_mean))


class MultiTurn(_Strict):
    """Chats of several turns: each turn resends the conversation so far (AIPerf's
    synthetic multi-turn conversations)."""

    turns: int = Field(ge=2, le=1000, description="Turns per conversation.")
    conversations: int = Field(
        ge=1, le=1_000_000, description="Distinct conversations AIPerf generates and cycles.")
    turn_delay_ms: float = Field(
        default=0.0, ge=0, description="User think time between a reply and the next turn.")


class Trace(_Strict):
    """A Mooncake-style JSONL trace (`timestamp` in ms, `input_length`, `output_length`,
    `hash_ids` naming shared KV blocks), replayed by AIPerf on its own timestamps."""

    file: Path = Field(description="The JSONL trace; a relative path is relative to the "
                                   "scenario file.")
    block_size: int = Field(
        default=512, gt=0, le=65_536,
        description="Tokens per hash id in the trace (Mooncake's traces: 512).")
    speedup: list[float] = Field(
        default=[1.0], description="Replay speed-ups to sweep (2: the trace's arrivals twice "
                                   "as fast); one sweep point each.")

    def digest(self) -> str:
        """The trace's content hash: a resumed sweep reuses points only for the same trace."""
        try:
            return hashlib.sha256(self.file.read_bytes()).hexdigest()[:16]
        except OSError:
            return "unreadable"


class PromptCorpus(StrEnum):
    """Where AIPerf takes synthetic prompt text from (also for a trace's hash-id blocks)."""

    SONNET = "sonnet"
    CODING = "coding"
    RANDOM = "random"


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
    input_tokens: TokenLengths | None = Field(
        default=None, description="Prompt length distribution (not with trace).")
    output_tokens: TokenLengths | None = Field(
        default=None, description="Completion length distribution (not with trace).")
    shared_prefix: SharedPrefix | None = Field(
        default=None, description="Share prompt prefixes between requests (KV-router "
                                  "workloads).")
    multi_turn: MultiTurn | None = Field(default=None, description="Multi-turn chats.")
    trace: Trace | None = Field(
        default=None, description="Replay a trace instead of synthetic prompts; the sweep "
                                  "is trace.speedup.")
    prompt_corpus: PromptCorpus = Field(
        default=PromptCorpus.SONNET,
        description="sonnet | coding | random: text of synthetic prompts (AIPerf's corpora; "
                    "random draws token ids from the model's vocabulary).")
    reset_prefix_cache: bool = Field(
        default=False,
        description="Restart the workers before every point (and repetition) so each starts "
                    "with an empty prefix cache; needs dis-serve to own the graph (no --url).")
    input_buckets: list[int] = Field(
        default=[1024, 4096],
        description="Input-length bucket edges in tokens for goodput by prompt length "
                    "(e.g. [1024, 4096]: <1024, 1024-4095, >=4096).")
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
    max_error_pct: float = Field(
        default=1.0, ge=0, le=100,
        description="Share of a point's requests that may fail (HTTP error, timeout, "
                    "cancelled), in %; above it the point is invalid: the report marks it, "
                    "`bench` exits 1 and the CI gate refuses it as a baseline.")
    point_timeout_s: float = Field(
        default=3600.0, gt=0,
        description="A sweep point still running after this long is stopped and the sweep fails.")

    @model_validator(mode="after")
    def _check(self) -> Scenario:
        if not is_valid_name(self.name):
            raise ValueError(f"name {self.name[:60]!r} must be 2-40 lower-case letters, digits or "
                             "dashes, starting with a letter (it names a directory)")
        if self.input_buckets != sorted(set(self.input_buckets)) or any(
                edge <= 0 for edge in self.input_buckets):
            raise ValueError(f"input_buckets {self.input_buckets} must be positive token "
                             "counts in increasing order, e.g. [1024, 4096]")
        if self.trace is not None:
            return self._check_trace()
        if self.input_tokens is None or self.output_tokens is None:
            raise ValueError("give input_tokens and output_tokens (or a trace: to replay)")
        if (self.requests is None) == (self.duration_s is None):
            raise ValueError("give exactly one of requests (per point) and duration_s "
                             "(seconds per point)")
        if (self.concurrency is None) == (self.request_rate is None):
            raise ValueError("give exactly one of concurrency: [..] and request_rate: [..] "
                             "as the sweep")
        if (self.shared_prefix is not None
                and self.shared_prefix.prefix_tokens(self.input_tokens.mean)
                >= self.input_tokens.mean):
            raise ValueError(f"shared_prefix.ratio {self.shared_prefix.ratio:g} leaves no "
                             f"unique tokens in a {self.input_tokens.mean}-token prompt; "
                             "lower the ratio or raise input_tokens.mean")
        values: list[float] = list(self.concurrency or self.request_rate or [])
        key = "concurrency" if self.concurrency is not None else "request_rate"
        self._check_sweep(key, values)
        return self

    def _check_sweep(self, key: str, values: list[float]) -> None:
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

    def _check_trace(self) -> Scenario:
        assert self.trace is not None
        clashing = [key for key in ("input_tokens", "output_tokens", "shared_prefix",
                                    "multi_turn", "requests", "duration_s", "concurrency",
                                    "request_rate")
                    if getattr(self, key) is not None]
        if clashing:
            raise ValueError(f"trace: replays the trace's own requests and timing; remove "
                             f"{', '.join(clashing)}")
        if self.prompt_corpus is PromptCorpus.RANDOM:
            raise ValueError("prompt_corpus random cannot fill a trace's hash-id blocks "
                             "(AIPerf builds them from a text corpus); use sonnet or coding")
        if self.warmup_requests:
            raise ValueError("warmup_requests does not apply to a trace replay (AIPerf "
                             "replays every row on its timestamp); set it to 0")
        self._check_sweep("trace.speedup", list(self.trace.speedup))
        return self

    @property
    def fixed_output_tokens(self) -> int | None:
        """The output length every request must reach, when the scenario fixes it: one
        length (no spread) and the server told to ignore end-of-sequence."""
        if (self.output_tokens is None or self.output_tokens.stddev > 0
                or not self.ignore_eos):
            return None
        return self.output_tokens.mean

    @property
    def load_kind(self) -> LoadKind:
        if self.trace is not None:
            return LoadKind.SPEEDUP
        return LoadKind.CONCURRENCY if self.concurrency is not None else LoadKind.REQUEST_RATE

    def points(self) -> list[SweepPoint]:
        """The sweep in the order the user listed it."""
        values: list[float] | list[int] | None
        if self.trace is not None:
            values = self.trace.speedup
        else:
            values = self.concurrency if self.concurrency is not None else self.request_rate
        return [SweepPoint(kind=self.load_kind, value=float(v)) for v in values or []]

    def workload_label(self) -> str:
        """One line saying what the requests look like, for reports."""
        if self.trace is not None:
            return (f"trace {self.trace.file.name} replayed on its timestamps "
                    f"({self.trace.block_size} tokens per hash id)")
        assert self.input_tokens is not None and self.output_tokens is not None
        text = (f"input {self.input_tokens.mean} ± {self.input_tokens.stddev:g} tokens, "
                f"output {self.output_tokens.mean} ± {self.output_tokens.stddev:g} tokens")
        if self.shared_prefix is not None:
            text += (f"; {self.shared_prefix.prefix_tokens(self.input_tokens.mean)} of the "
                     f"input tokens are one of {self.shared_prefix.prefixes} shared prefixes")
        if self.multi_turn is not None:
            text += (f"; {self.multi_turn.conversations} chats of {self.multi_turn.turns} "
                     f"turns")
        return text


def load_scenario(path: Path) -> Scenario:
    """The scenario in `path`, its trace (if any) located relative to the file and checked."""
    from ..inputs.mooncake_trace import check_trace
    from ..inputs.yaml_input import load_model_file

    scenario = load_model_file(Scenario, path)
    if scenario.trace is None:
        return scenario
    trace_file = scenario.trace.file
    if not trace_file.is_absolute():
        trace_file = (path.parent / trace_file).resolve()
    check_trace(trace_file, source=str(path))
    trace = scenario.trace.model_copy(update={"file": trace_file})
    return scenario.model_copy(update={"trace": trace})
