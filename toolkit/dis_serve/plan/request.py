"""What a plan is asked for: model, GPU, workload, objective, SLA and price."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Annotated

from pydantic import (
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from ..errors import UserInputError
from ..hardware.catalog import GPUS, KNOWN_MODELS, GpuType, KnownModel, find_known_model
from ..inputs import options
from ..inputs.options import CliFlag
from ..inputs.request_model import RequestModel
from ..topology import Hardware, KvCacheDtype, Placement, PlacementKind, WeightDtype
from .perf_model import ModelOnGpu, PerfSource

# Mooncake traces hash prompts in blocks of 512 tokens.
MOONCAKE_BLOCK_TOKENS = 512
# A chat request's prompt reaches the engine wrapped in the model's chat template (role
# headers, the assistant turn; a system block where the template adds one), so the graph
# must accept this many tokens beyond the longest planned prompt: without it a planned
# 128 + 32-token sequence cut completions of 128-token chat prompts 3 tokens short.
CHAT_TEMPLATE_TOKENS = 32


class Objective(StrEnum):
    FEWEST_GPUS = "fewest-gpus"
    """Serve a target request rate under the SLA on as few GPUs as possible."""
    MOST_GOODPUT = "most-goodput"
    """Serve as many requests per second under the SLA as a GPU budget allows."""


class Arrival(StrEnum):
    POISSON = "poisson"
    """Independent requests at a mean rate (online serving): bursts queue, so batches are
    planned below their caps."""
    OFFLINE = "offline"
    """A closed loop (a batch job, or the offline max-load runs of published throughput
    tables): a fixed number of requests in flight, the next sent as one finishes, so there
    are no bursts and a decode batch runs at its cap."""


@dataclass(frozen=True)
class TraceStats:
    """What a Mooncake-format trace says about its workload."""

    path: Path
    requests: int
    mean_isl: int
    mean_osl: int
    max_isl: int
    max_osl: int
    rate_per_s: float | None
    block_size: int


def read_trace(path: Path, block_size: int = MOONCAKE_BLOCK_TOKENS) -> TraceStats:
    """Read a Mooncake JSONL trace: one request a line with `input_length`, `output_length`
    and, for arrivals, `timestamp` in milliseconds (Dynamo's replay reads the same file)."""
    from ..inputs.mooncake_trace import check_trace

    rows = check_trace(path, key="--trace")
    inputs = [row.input_length for row in rows]
    # Dynamo's replay needs every request's completion length.
    missing = next((n for n, row in enumerate(rows, 1) if row.output_length is None), None)
    if missing is not None:
        raise UserInputError(f"{path}: request {missing} has no output_length",
                             key="--trace", fix="give every line an output_length")
    outputs = [row.output_length or 0 for row in rows]
    stamps = [float(row.timestamp) for row in rows if row.timestamp is not None]
    span_s = (max(stamps) - min(stamps)) / 1000.0 if len(stamps) > 1 else 0.0
    return TraceStats(
        path=path, requests=len(inputs),
        mean_isl=round(sum(inputs) / len(inputs)), mean_osl=round(sum(outputs) / len(outputs)),
        max_isl=max(inputs), max_osl=max(outputs),
        rate_per_s=(len(stamps) - 1) / span_s if span_s > 0 else None, block_size=block_size)


# The models the planner has data for (AIConfigurator's names them); the others in the
# catalog can run, but not be planned.
PLANNED_MODELS = tuple(k for k, m in KNOWN_MODELS.items() if m.aiconfigurator_name)
# One home for "GPUs in a node": the topology's hardware section, default and bounds.
NODE_GPUS = Hardware.model_fields["gpus_per_node"]
SPLIT_PATTERN = re.compile(r"(\d+):(\d+)")


class PlanRequest(RequestModel):
    """One planning question. Either `rate` (fewest GPUs that serve it) or `budget` (most
    goodput those GPUs give), and either `isl`/`osl` or a `trace`. Each field is a flag of
    `dis-serve plan` (`flag_of`), its description the flag's help (inputs/options.py);
    inf and nan are no SLA, rate or price (RequestModel), refused here, not in the search."""

    model: str = Field(description="Catalog key or Hugging Face id: "
                                   + ", ".join(PLANNED_MODELS) + ".")
    gpu: GpuType = Field(default=GpuType.H100_SXM, description="GPU type from the catalog.")
    dtype: WeightDtype = Field(default=WeightDtype.BF16, description="Weight format.")
    kv_cache_dtype: KvCacheDtype = Field(default=KvCacheDtype.BF16,
                                         description="KV-cache format.")
    kv_memory_fraction: float | None = Field(
        default=None, gt=0, le=1,
        description="Share of free GPU memory the KV cache of decode and aggregated workers "
                    "gets (free_gpu_memory_fraction; default: the engine templates', 0.85); "
                    "the emitted topology sets it on those pools.")
    checkpoint: str | None = Field(
        default=None, min_length=1,
        description="Your own checkpoint in `dtype` (Hugging Face id or path), for a format "
                    "the catalog publishes none of, such as a Model Optimizer FP8 export; the "
                    "emitted topology loads it with model.prequantized: true.")
    isl: int | None = Field(default=None, gt=0, le=131072,
                            description="Prompt tokens per request.")
    osl: int | None = Field(default=None, gt=1, le=65536,
                            description="Output tokens per request.")
    trace: Path | None = Field(
        default=None, description="Mooncake JSONL trace instead of `isl`/`osl` (its mean "
                                  "lengths are planned for, its timestamps give the rate, the "
                                  "replay replays it).")
    trace_block_size: int = Field(default=MOONCAKE_BLOCK_TOKENS, gt=0,
                                  description="Tokens per hash id in the trace.")
    arrival: Arrival = Field(
        default=Arrival.POISSON,
        description="How requests arrive: poisson (online traffic at a mean rate) or offline "
                    "(a closed loop: a fixed number in flight, each decode batch at its cap). "
                    "A `trace` brings its own arrivals.")
    rate: float | None = Field(
        default=None, gt=0, description="Objective (a): serve this many requests/s on the "
                                        "fewest GPUs.")
    budget: int | None = Field(default=None, gt=0, le=4096,
                               description="Objective (b): most goodput from this many GPUs.")
    ttft_ms: float = Field(gt=0, description="SLA: time to first token at `sla_percentile` "
                                             "(ms).")
    # The search bounds the predicted percentile of per-request mean ITL, the replay
    # counts requests whose mean ITL (and TTFT) meet it: one statistic, said once.
    itl_ms: float = Field(gt=0, description="SLA: each request's mean inter-token latency at "
                                            "`sla_percentile` (ms).")
    sla_percentile: float = Field(
        default=90.0, ge=50, le=99.9,
        description="The percentile `ttft_ms` and `itl_ms` bound: that share of requests meets "
                    "both (90: nine in ten; MLPerf's Server and Interactive scenarios bound the "
                    "99th).")
    price_per_gpu_hour: Annotated[float | None, CliFlag("--price")] = Field(
        default=None, gt=0, description="USD per GPU-hour (default: the catalog's list "
                                        "price).")
    gpus_per_node: Annotated[int, NODE_GPUS]
    tp: int | None = Field(
        default=None, ge=1, le=16,
        description="Only this tensor-parallel size for every worker (default: every size "
                    "that fits a node); what a published table fixes.")
    perf_model: PerfSource | None = Field(
        default=None, description="Force a performance model (default: AIConfigurator where "
                                  "it has data, else the roofline).")
    top: int = Field(default=5, ge=1, le=50, description="Rows per table.")
    compare_split: Annotated[tuple[PositiveInt, PositiveInt] | None,
                             CliFlag(metavar="PREFILL:DECODE")] = Field(
        default=None, description="Also evaluate a fixed PREFILL:DECODE GPU split, e.g. 8:40.")
    placement: PlacementKind = Field(
        default=Placement().kind,
        description="Where the trtllm topology runs: local (one machine), hosts (one script "
                    "per machine; set each node's address) or slurm (one sbatch job); its nodes "
                    "come from the GPUs and `gpus_per_node`, prefill packed beside decode so "
                    "KV transfer stays inside a node where the split allows.")
    replay: bool = Field(default=True, description="Verify the plan in Dynamo's virtual-clock "
                                                   "replay (backing off until it holds).")
    calibrate: tuple[Path, ...] = Field(
        default=(), description="`bench` results (results.json or its folder; repeatable), "
                                "or the ledger (a .jsonl: its entries for this model and GPU), "
                                "to fit per-phase correction factors from; the plan uses them "
                                "and writes calibration.json.")
    replay_requests: int | None = Field(
        default=None, gt=0, description="Requests to replay (default: enough for a steady "
                                        "state).")
    autoscale: bool = Field(
        default=False,
        description="Give the trtllm topology an autoscale section: on Kubernetes Dynamo's "
                    "SLA planner then holds the SLA within the planned GPUs.")

    @field_validator("gpu", mode="before")
    @classmethod
    def _known_gpu(cls, value: object) -> object:
        if isinstance(value, str) and value not in {g.value for g in GpuType}:
            raise ValueError(f"unknown GPU {value!r}; use one of "
                             + ", ".join(g.value for g in GpuType))
        return value

    @field_validator("compare_split", mode="before")
    @classmethod
    def _split_text(cls, value: object) -> object:
        """`8:40` as the command line gives it."""
        if not isinstance(value, str):
            return value
        match = SPLIT_PATTERN.fullmatch(value.strip())
        if not match or 0 in (int(match[1]), int(match[2])):
            raise ValueError(f"{value!r} is not PREFILL:DECODE GPUs (e.g. 8:40)")
        return int(match[1]), int(match[2])

    @model_validator(mode="after")
    def _check(self) -> PlanRequest:
        if self.rate is not None and self.budget is not None:
            raise ValueError("give either `rate` or `budget`, not both")
        if self.rate is None and self.budget is None and self.trace is None:
            raise ValueError("give `rate` (requests/s to serve with the fewest GPUs) or "
                             "`budget` (GPUs to get the most goodput from)")
        if self.trace is None and (self.isl is None or self.osl is None):
            raise ValueError("give `isl` and `osl`, or a `trace`")
        if self.trace is not None and (self.isl is not None or self.osl is not None):
            raise ValueError("`trace` sets the lengths; drop `isl`/`osl`")
        if self.trace is not None and self.arrival is Arrival.OFFLINE:
            raise ValueError("`trace` sets the arrivals by its timestamps; drop `arrival`")
        known = self.known_model
        if (known is not None and known.checkpoint(self.dtype.value) is None
                and self.checkpoint is None):
            # The plan ends in a topology that names the checkpoint its workers load.
            raise ValueError(f"no {self.dtype.value} checkpoint of {known.hf_id} is published "
                             "in the catalog; plan it with `dtype` one of "
                             + ", ".join(known.checkpoints) + ", or give `checkpoint`: your "
                             f"own {self.dtype.value} export (NVIDIA Model Optimizer)")
        context = known.architecture.max_position_embeddings if known else None
        if context is not None and self.isl is not None and self.osl is not None and (
                self.isl + CHAT_TEMPLATE_TOKENS + self.osl > context):
            raise ValueError(
                f"`isl` {self.isl} + `osl` {self.osl} (+ {CHAT_TEMPLATE_TOKENS} chat-template "
                f"tokens) is longer than {known.hf_id}'s {context}-token context; shorten "
                "them or plan a model with a longer context")
        return self

    @field_validator("model")
    @classmethod
    def _known(cls, value: str) -> str:
        if find_known_model(value) is None:
            raise ValueError(f"unknown model {value!r}; the planner knows "
                             + ", ".join(PLANNED_MODELS))
        return value

    @property
    def known_model(self) -> KnownModel | None:
        return find_known_model(self.model)

    @property
    def objective(self) -> Objective:
        return Objective.MOST_GOODPUT if self.budget is not None else Objective.FEWEST_GPUS

    @property
    def sla_share(self) -> float:
        """The share of requests the SLA holds for (0.9 at the 90th percentile)."""
        return self.sla_percentile / 100.0

    @property
    def hourly_price(self) -> float:
        return self.price_per_gpu_hour or GPUS[self.gpu].price_per_hour_usd

    def target(self) -> ModelOnGpu:
        known = self.known_model
        assert known is not None
        key = next(k for k, m in KNOWN_MODELS.items() if m is known)
        share = {} if self.kv_memory_fraction is None else {"kv_share": self.kv_memory_fraction}
        return ModelOnGpu(name=key, aiconfigurator_name=known.aiconfigurator_name,
                          architecture=known.architecture, dtype=self.dtype,
                          kv_cache_dtype=self.kv_cache_dtype, gpu_name=self.gpu.value,
                          gpu=GPUS[self.gpu], **share)


@dataclass(frozen=True)
class Workload:
    """The lengths and arrival rate the plan sizes for."""

    isl: int
    osl: int
    max_isl: int
    """The longest prompt the graph must accept: the workload's plus CHAT_TEMPLATE_TOKENS."""
    max_osl: int
    rate: float | None
    trace: TraceStats | None
    arrival: Arrival = Arrival.POISSON

    @property
    def closed_loop(self) -> bool:
        return self.arrival is Arrival.OFFLINE

    @classmethod
    def of(cls, request: PlanRequest) -> Workload:
        if request.trace is None:
            assert request.isl is not None and request.osl is not None
            return cls(request.isl, request.osl, request.isl + CHAT_TEMPLATE_TOKENS,
                       request.osl, request.rate, None, request.arrival)
        stats = read_trace(request.trace, request.trace_block_size)
        rate = request.rate
        if rate is None and request.budget is None:
            if stats.rate_per_s is None:
                raise UserInputError("the trace has no timestamps to take a rate from",
                                     source=str(stats.path), fix="add a `rate` or `budget`")
            rate = stats.rate_per_s
        return cls(stats.mean_isl, stats.mean_osl, stats.max_isl + CHAT_TEMPLATE_TOKENS,
                   stats.max_osl, rate, stats)


class PlanFiles(RequestModel):
    """What `dis-serve plan` writes, beside the question: where its files go and whether to
    copy its topology."""

    out: Path | None = Field(
        default=None, description="Directory for plan.json, pareto.png, topologies and the "
                                  "mocker profile (default: .dis-serve/plans/NAME).")
    emit: Path | None = Field(
        default=None, description="Also write the chosen topology here (the mocker graph with "
                                  "`mock`); refused for a plan that failed its replay unless "
                                  "`force`.")
    mock: bool = Field(default=False, description="`emit` writes the mocker graph timed like "
                                                  "the planned GPUs.")
    force: bool = Field(default=False,
                        description="`emit` the plan even if it failed its replay.")


def build_request(**values: object) -> PlanRequest:
    """A `PlanRequest` from keyword values (None: the default); any problem becomes one
    UserInputError whose key is the field and whose message names fields in backticks, for
    the caller to word in its own terms (the CLI's flags)."""
    return options.parse_values(PlanRequest, values)


def flag_of(field: str) -> str:
    """The `dis-serve plan` flag of a `PlanRequest` field: `--price` for
    `price_per_gpu_hour`, `--field-name` where the field says nothing else."""
    return options.flag_of(PlanRequest, field)
