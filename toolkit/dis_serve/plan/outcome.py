"""What a plan run produced, as frozen models: written as `plan.json`, printed by the CLI.

Like `bench`'s `BenchResult`, these hold figures and sentences, never tables or colours: the
CLI draws them, programs read the JSON."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from ..topology import Mode, Pool, PoolRole
from .request import PlanRequest

# Figures keep full precision in memory (the CLI formats them) and four decimals in JSON.
Figure = Annotated[float, PlainSerializer(lambda v: round(v, 4), when_used="json")]


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedPool(Pool):
    """One pool of a deployment: the schema's own `Pool` (what the topology gets) and its
    role."""

    role: PoolRole = Field(description="prefill, decode or agg.")


class Latencies(_Frozen):
    """TTFT and ITL as the plan reports them (predicted, replayed or measured)."""

    ttft_mean_ms: Figure = Field(description="Mean time to first token.")
    ttft_p90_ms: Figure = Field(description="90th-percentile time to first token.")
    itl_mean_ms: Figure = Field(description="Mean inter-token latency.")
    itl_p90_ms: Figure = Field(description="90th percentile of requests' mean ITL.")
    ttft_tail_ms: Figure | None = Field(
        default=None, description="TTFT at the SLA's percentile (`request.sla_percentile`; "
                                  "at the default 90th, `ttft_p90_ms`).")
    itl_tail_ms: Figure | None = Field(
        default=None, description="Requests' mean ITL at the SLA's percentile.")


class Deployment(Latencies):
    """One candidate deployment at the rate it is planned for, with the model's prediction
    (the latencies are predicted)."""

    mode: Mode = Field(description="agg or disagg.")
    gpus: int = Field(description="GPUs the deployment uses.")
    label: str = Field(description="`prefill 14x TP2 (batch 1) + decode ...`.")
    short_label: str = Field(description="`P 14xTP2 b1 + D 5xTP4 b140`.")
    pools: list[PlannedPool] = Field(description="Its pools.")
    requests_per_s: Figure = Field(description="Planned goodput.")
    tokens_per_s: Figure = Field(description="Output tokens per second.")
    tokens_per_s_per_gpu: Figure = Field(description="Output tokens per second per GPU used.")
    tokens_per_s_per_user: Figure = Field(description="1000 / mean ITL.")
    runs_out_first: str = Field(description="The resource that runs out first as load grows.")


class Replay(Latencies):
    """A deployment replayed in Dynamo's virtual-clock simulator (the latencies are the
    replay's, over the steady-state window)."""

    deployment: str = Field(description="`plan` or `split`.")
    replayed: str = Field(description="The whole deployment, or which slice of it ran.")
    requests: int = Field(description="Requests replayed.")
    measured_requests: int = Field(description="Requests in the steady-state window.")
    steady: bool = Field(description="Whether a steady-state window was found.")
    requests_per_s: Figure = Field(description="Requests finished per second in the window.")
    output_tokens_per_s: Figure = Field(description="Output tokens per second in the window.")
    sla_met_share: Figure = Field(description="Share of measured requests that met the SLA.")
    passed: bool = Field(description="Whether the plan held: the SLA for at least the share "
                                     "of requests its percentile promises (90% by default), "
                                     "a steady state, and the planned throughput within one "
                                     "back-off step.")
    failed_because: str | None = Field(default=None,
                                       description="Which of those failed, if one did.")
    wall_s: Figure = Field(description="Wall time of the replay.")
    worst_difference_means: Figure = Field(
        description="Largest relative gap to the prediction over mean TTFT, ITL, throughput.")
    worst_difference_p90: Figure = Field(
        description="Largest relative gap to the prediction over the p90 TTFT and ITL.")
    agreement: str = Field(description="One sentence on how replay and prediction agree.")


class VerificationStep(_Frozen):
    """One replay the planner ran before offering a plan."""

    mode: Mode = Field(description="agg or disagg.")
    deployment: str = Field(description="Its label.")
    gpus: int = Field(description="GPUs the deployment uses.")
    requests_per_s: Figure = Field(description="The rate it was replayed at.")
    tokens_per_s_per_gpu: Figure = Field(
        description="Output tokens per second per GPU used, at that rate.")
    sla_met_share: Figure = Field(description="Share of measured requests that met the SLA.")
    served_per_s: Figure | None = Field(default=None,
                                        description="Requests/s the replay served.")
    passed: bool = Field(description="Whether the deployment held (see `Replay.passed`).")
    failed_because: str | None = Field(default=None, description="Why not, if it did not.")


class LedgerError(_Frozen):
    """How far this model has been from real runs: measured over predicted on the ledger's
    entries nearest this plan (same model and GPU; `plan.ledger`)."""

    entries: int = Field(description="Entries the ratios are the median of.")
    of: int = Field(description="Entries the ledger holds for this model and GPU.")
    ledger: str = Field(description="The ledger file.")
    ttft_mean: float | None = Field(description="Measured / predicted mean TTFT.")
    itl_mean: float | None = Field(description="Measured / predicted mean ITL.")
    requests_per_s: float | None = Field(description="Measured / predicted requests/s.")
    nearest: list[str] = Field(description="The entries used.")


class ModeErrorInfo(_Frozen):
    """The error one mode's prediction carries at this plan (`plan.model_error`)."""

    mode: Mode = Field(description="agg or disagg.")
    error: Figure = Field(description="Relative error of its throughput prediction there: "
                                      "the root-mean-square of its nearest measured cases', "
                                      "grown with the distance to them.")
    distance: Figure = Field(description="Distance to the nearest measured case (0: the plan "
                                         "is one; a unit is a factor e in a length, latency, "
                                         "size or bandwidth, or one mismatch of arrivals, "
                                         "weight format, engine or performance model).")
    nearest: list[str] = Field(description="The measured cases it comes from, nearest first.")


class Verdict(_Frozen):
    """Whether disaggregation pays, with the margin and the error around it (what a CI job
    reads: `too_close_to_call`, or `margin` against `model_error`, one unit)."""

    disaggregation_pays: bool = Field(description="Whether disagg beats agg by 5%+.")
    sentence: str = Field(description="Why the plan is the mode it is, in one sentence.")
    margin: Figure | None = Field(
        description="Disaggregated against aggregated, as a share of the aggregated figure: "
                    "tokens/s per GPU (a budget: d / a - 1) or GPUs saved (a rate: "
                    "(a - d) / a); negative where aggregated serving is ahead; None when only "
                    "one mode meets the SLA.")
    margin_of: str = Field(description="What the margin compares: tokens/s per GPU, or GPUs "
                                       "saved.")
    model_error: Figure | None = Field(
        description="How far the margin may be off, given each mode's measured error near "
                    "this plan, in the margin's unit (None: a mode was never measured).")
    mode_errors: list[ModeErrorInfo] = Field(description="Each mode's error and its evidence.")
    too_close_to_call: bool = Field(
        description="The margin is inside the model's error: measure it (`compare_command`).")
    uncertainty: str = Field(description="The margin against the error, in a sentence.")
    compare_command: str | None = Field(
        default=None, description="The `dis-serve compare` run of `topologies` on the user's "
                                  "own GPUs that settles the verdict.")
    topologies: dict[str, str] = Field(
        default_factory=dict, description="The best deployment of each mode as a trtllm "
                                          "topology, by mode.")
    scenario: str | None = Field(default=None, description="The workload and SLA as a "
                                                           "`bench` scenario.")


class PerformanceModelInfo(_Frozen):
    source: str = Field(description="aiconfigurator or roofline.")
    detail: str = Field(description="The data or constants behind the numbers.")
    fallback_reason: str | None = Field(description="Why the roofline answered, if it did.")


class WorkloadInfo(_Frozen):
    isl: int = Field(description="Prompt tokens planned for (a trace's mean).")
    osl: int = Field(description="Output tokens planned for (a trace's mean).")
    rate: float | None = Field(description="Requests/s asked for (None: most goodput).")


class SavingsInfo(_Frozen):
    gpus: int = Field(description="GPUs saved against the best aggregated deployment.")
    agg_gpus: int = Field(description="GPUs the aggregated deployment needs.")
    share: float = Field(description="gpus / agg_gpus.")
    yearly_usd: int = Field(description="What the saved GPUs cost a year.")
    price_per_gpu_hour: float = Field(description="USD per GPU-hour it was priced at.")


class CalibrationPoint(_Frozen):
    """One measured point against the model's prediction, before and after calibration."""

    source: str = Field(description="results.json and the sweep point.")
    isl: int = Field(description="Mean prompt tokens AIPerf sent.")
    osl: int = Field(description="Mean output tokens AIPerf received.")
    requests_per_s: float = Field(description="Measured throughput the point is predicted at.")
    measured_ttft_ms: float = Field(description="AIPerf's mean TTFT.")
    measured_itl_ms: float = Field(description="AIPerf's mean ITL.")
    predicted_ttft_ms: float = Field(description="Before calibration.")
    predicted_itl_ms: float = Field(description="Before calibration.")
    calibrated_ttft_ms: float = Field(description="Predicted mean TTFT with the factors.")
    calibrated_itl_ms: float = Field(description="Predicted mean ITL with the factors.")


class Calibration(_Frozen):
    """Per-phase factors (measured / predicted) fitted by `plan --calibrate`, and the points
    they came from (`calibration.json`)."""

    prefill: float = Field(description="Prefill time per token: measured / predicted.")
    decode: float = Field(description="Decode ITL against batch: measured / predicted.")
    kv_transfer: float | None = Field(
        description="KV-transfer time: measured / predicted (None: not identifiable from "
                    "these results, planned at 1).")
    points: list[CalibrationPoint]


class PlanOutcome(_Frozen):
    """Everything `dis-serve plan` decided and checked (`plan.json`)."""

    request: PlanRequest = Field(description="What was asked.")
    title: str = Field(description="Model, GPU, lengths, objective and SLA in one line.")
    workload: WorkloadInfo = Field(description="The lengths and rate planned for.")
    performance_model: PerformanceModelInfo = Field(description="Which model answered.")
    calibration: Calibration | None = Field(
        default=None, description="Factors fitted from `bench` results, planned with.")
    plan: Deployment = Field(description="The deployment offered.")
    plan_yearly_usd: int = Field(description="What the plan's GPUs cost a year.")
    disaggregation_pays: bool = Field(description="Whether disagg beats agg by 5%+.")
    verdict: Verdict = Field(description="Whether disaggregation pays, by how much, and "
                                         "whether the data can tell.")
    savings: SavingsInfo | None = Field(description="Against the best agg deployment.")
    top_disaggregated: list[Deployment]
    top_aggregated: list[Deployment]
    split: Deployment | None = Field(description="The fixed split at its best, if asked.")
    split_gpus: tuple[int, int] | None = Field(description="The fixed split asked for.")
    replay: list[Replay]
    verification: list[VerificationStep] = Field(
        description="Every replay taken to verify the plan, in order.")
    emit_refused: str | None = Field(
        default=None, description="Why --emit wrote nothing (the plan failed its replay).")
    placement_note: str | None = Field(
        default=None, description="The trtllm topology's cluster placement and KV locality.")
    measured_error: LedgerError | None = Field(
        default=None, description="The model's recorded error on the nearest measured runs.")
    planning_seconds: float = Field(description="Wall time of the search.")
    files: dict[str, str] = Field(description="What was written, by what it is.")
