"""The ledger of predicted against measured: how far the planner's model has been from real
runs, kept so the next plan can say so.

Every measured run of a graph `plan --emit` wrote (a `bench`, a run of `compare`, the
fault-free run of `chaos`: vs_measured.record_planned_run) appends one JSON line per sweep
point (predicted, replayed and measured TTFT, ITL and throughput, the point's fingerprint);
a point already in
the ledger (a resumed sweep) is not added again. `plan` reads the entries for the same model
and GPU and prints the recorded error on the ones nearest its workload, and `plan
--calibrate LEDGER.jsonl` fits its correction factors from them. The file is
`.dis-serve/ledger.jsonl` under the working directory, like the plans; DIS_SERVE_LEDGER
names another.
"""

from __future__ import annotations

import math
import os
import statistics
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..bench.metrics import BenchResult
from ..bench.validity import point_problems
from .outcome import LedgerError, PlanOutcome, Verdict

LEDGER_ENV = "DIS_SERVE_LEDGER"
DEFAULT_LEDGER = Path(".dis-serve/ledger.jsonl")
# Entries the recorded error is taken over: the nearest few, so one odd run does not decide.
NEAREST_ENTRIES = 3


def ledger_path() -> Path:
    return Path(os.environ.get(LEDGER_ENV) or DEFAULT_LEDGER)


class Figures(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ttft_mean_ms: float | None
    ttft_p90_ms: float | None
    itl_mean_ms: float | None
    itl_p90_ms: float | None
    requests_per_s: float | None
    output_tokens_per_s: float | None


class LedgerEntry(BaseModel):
    """One measured sweep point of a planned graph beside what the plan said of it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    recorded_at: str = Field(description="When bench recorded it (UTC, ISO 8601).")
    fingerprint: str = Field(description="The sweep point's fingerprint (bench's own).")
    model: str = Field(description="Catalog key of the planned model.")
    gpu: str
    dtype: str
    kv_cache_dtype: str
    mode: str = Field(description="agg or disagg.")
    deployment: str = Field(description="The plan's label.")
    isl: int
    osl: int
    performance_model: str = Field(description="aiconfigurator or roofline.")
    plan_file: str
    topology_file: str | None = Field(default=None, description="The graph bench ran.")
    point: str = Field(description="The sweep point's label.")
    measured_isl: float | None = Field(default=None, description="Mean prompt tokens sent.")
    measured_osl: float | None = Field(default=None,
                                       description="Mean output tokens received.")
    nearest_to_plan: bool = Field(description="The point whose throughput is closest to the "
                                              "planned rate (the one the plan describes).")
    predicted: Figures
    replayed: Figures | None
    measured: Figures
    verdict: Verdict | None = Field(
        default=None, description="The plan's verdict: its margin, the model's error around "
                                  "it and whether it was too close to call (what this "
                                  "measurement settles or checks).")


def entries_for(outcome: PlanOutcome, plan_file: Path,
                result: BenchResult) -> list[LedgerEntry]:
    """The ledger lines of one bench result of a planned graph."""
    plan, request = outcome.plan, outcome.request
    replay = next((r for r in outcome.replay if r.deployment == "plan"), None)
    # Only what bench itself accepts as a measurement (an invalid point is no evidence).
    points = [p for p in result.points if p.aiperf.ttft_ms and p.aiperf.itl_ms
              and not point_problems(result.scenario, p)]
    nearest = min(points, key=lambda p: abs(p.aiperf.request_throughput - plan.requests_per_s),
                  default=None)
    now = datetime.now(UTC).isoformat(timespec="seconds")
    return [LedgerEntry(
        recorded_at=now, fingerprint=p.fingerprint, model=request.target().name,
        gpu=request.gpu.value, dtype=request.dtype.value,
        kv_cache_dtype=request.kv_cache_dtype.value, mode=plan.mode.value,
        deployment=plan.label, isl=outcome.workload.isl, osl=outcome.workload.osl,
        performance_model=outcome.performance_model.source, plan_file=str(plan_file),
        topology_file=result.topology_file, point=p.point.label,
        measured_isl=p.aiperf.input_tokens_mean, measured_osl=p.aiperf.output_tokens_mean,
        nearest_to_plan=p is nearest,
        predicted=Figures(ttft_mean_ms=plan.ttft_mean_ms, ttft_p90_ms=plan.ttft_p90_ms,
                          itl_mean_ms=plan.itl_mean_ms, itl_p90_ms=plan.itl_p90_ms,
                          requests_per_s=plan.requests_per_s,
                          output_tokens_per_s=plan.tokens_per_s),
        replayed=None if replay is None else Figures(
            ttft_mean_ms=replay.ttft_mean_ms, ttft_p90_ms=replay.ttft_p90_ms,
            itl_mean_ms=replay.itl_mean_ms, itl_p90_ms=replay.itl_p90_ms,
            requests_per_s=replay.requests_per_s,
            output_tokens_per_s=replay.output_tokens_per_s),
        measured=Figures(ttft_mean_ms=p.aiperf.ttft_ms.avg, ttft_p90_ms=p.aiperf.ttft_ms.p90,
                         itl_mean_ms=p.aiperf.itl_ms.avg, itl_p90_ms=p.aiperf.itl_ms.p90,
                         requests_per_s=p.aiperf.request_throughput,
                         output_tokens_per_s=p.aiperf.output_token_throughput),
        verdict=outcome.verdict)
        for p in points]


def read_ledger(path: Path | None = None) -> list[LedgerEntry]:
    """Every readable entry (a line another version wrote and this one cannot read is
    skipped: the ledger outlives the code that writes it)."""
    path = path or ledger_path()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    entries = []
    for line in lines:
        try:
            entries.append(LedgerEntry.model_validate_json(line))
        except ValidationError:
            continue
    return entries


def append(entries: list[LedgerEntry], path: Path | None = None) -> int:
    """Add the entries the ledger does not hold yet (by fingerprint); how many were added."""
    path = path or ledger_path()
    known = {e.fingerprint for e in read_ledger(path)}
    new = [e for e in entries if e.fingerprint not in known]
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as out:
            out.writelines(e.model_dump_json() + "\n" for e in new)
    return len(new)


def recorded_error(outcome: PlanOutcome, path: Path | None = None) -> LedgerError | None:
    """Measured over predicted on the ledger's entries nearest this plan's workload, for the
    same model and GPU (None: the ledger has none)."""
    request = outcome.request
    same = [e for e in read_ledger(path) if e.nearest_to_plan
            and e.model == request.target().name and e.gpu == request.gpu.value]
    if not same:
        return None
    isl, osl = outcome.workload.isl, outcome.workload.osl
    same.sort(key=lambda e: abs(math.log(e.isl / isl)) + abs(math.log(e.osl / osl))
              + (e.mode != outcome.plan.mode.value))
    nearest = same[:NEAREST_ENTRIES]

    def ratio(field: str) -> float | None:
        pairs = [(getattr(e.measured, field), getattr(e.predicted, field)) for e in nearest]
        values = [m / p for m, p in pairs if m and p]
        return statistics.median(values) if values else None

    return LedgerError(
        entries=len(nearest), of=len(same), ledger=str(path or ledger_path()),
        ttft_mean=ratio("ttft_mean_ms"), itl_mean=ratio("itl_mean_ms"),
        requests_per_s=ratio("requests_per_s"),
        nearest=[f"{e.deployment}, ISL {e.isl} / OSL {e.osl}, {e.point} ({e.recorded_at})"
                 for e in nearest])
