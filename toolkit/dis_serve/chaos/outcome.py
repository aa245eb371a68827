"""What a chaos run measured, from AIPerf's records, the injections and the status samples.

Pure: no processes, no files. Definitions:
- failed: AIPerf recorded an error for the request.
- truncated: no error, but fewer output tokens than the request asked for.
- mismatched: completed, but its output token count differs from the fault-free run's for
  the same request (AIPerf's session number; same seed, same requests). Dynamo 1.6.1's
  mocker samples token ids at random per request, so the count is what can be compared.
- recovery: from a fault (the end of a pause) to the first status sample in which the graph
  is ready, every process ready, and a killed process replaced by a new pid; for a whole
  node killed, also the first in which it serves without that node (degraded, every process
  of the node gone): a lost node is not brought back by the graph.
- goodput while degraded: requests that ended inside a recovery window, without error,
  whole, and within the SLA, per second of those windows.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..bench.requests import RequestRecord
from ..errors import DisServeError
from .inject import Injection, Sample
from .scenario import ChaosScenario, Fault


class ChaosLimitExceeded(DisServeError):
    """A chaos run went past a limit of its scenario. Exit code 1."""

    exit_code = 1


class FaultReport(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    process: str = Field(description="What it hit: a process, `P on NODE`, `node NODE`.")
    action: str
    at_s: float = Field(description="Scheduled offset from the start of profiling.")
    pid: int | None = Field(description="The pid the fault hit (None: no such process then).")
    recovery_s: float | None = Field(
        description="Fault start to the graph serving with every process again; None if "
                    "it never did while we watched.")
    failed_requests: int = Field(description="Requests that failed between this fault and "
                                             "its recovery.")


class ChaosOutcome(BaseModel):
    """The result of `dis-serve chaos`, written as chaos.json."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    scenario: str
    topology: str
    requests: int
    failed: int
    truncated: int
    mismatched: int
    compared: int = Field(description="Completed requests whose token count was compared.")
    reference_failed: int | None = Field(
        description="Failed requests of the fault-free run (None: not run).")
    faults: list[FaultReport]
    goodput_rps: float = Field(description="Good requests per second over the whole run.")
    goodput_degraded_rps: float | None = Field(
        description="Good requests per second inside the recovery windows.")
    degraded_s: float = Field(description="Seconds covered by recovery windows.")
    error_kinds: dict[str, int]
    violations: list[str] = Field(description="Each limit exceeded, in words; empty: passed.")
    files: dict[str, str] = Field(default_factory=dict,
                                  description="What the run wrote, by what it is.")

    @property
    def passed(self) -> bool:
        return not self.violations

    def enforce(self) -> None:
        """The gate: ChaosLimitExceeded naming every limit the run went past."""
        if not self.passed:
            raise ChaosLimitExceeded(f"{self.scenario}: " + "; ".join(self.violations))


def _good(record: RequestRecord, scenario: ChaosScenario, expected: int) -> bool:
    sla = scenario.workload.sla
    return (record.error is None and (record.output_tokens or 0) >= expected
            and record.ttft_ms is not None and record.ttft_ms <= sla.ttft_ms
            and (record.itl_ms is None or record.itl_ms <= sla.itl_ms))


def recovery_ns(injection: Injection, samples: list[Sample]) -> int | None:
    """When the graph served again with every process after this fault, if it did."""
    fault = injection.fault
    node_lost = fault.process is None and fault.action.replaces_process
    for sample in samples:
        if sample.at_ns < injection.ended_ns:
            continue
        if node_lost and fault.node in sample.lost_nodes:
            return sample.at_ns
        if not sample.serving:
            continue
        replaced = sample.pids.get(injection.fault.process) != injection.pid
        if replaced or not injection.fault.action.replaces_process or injection.pid is None:
            return sample.at_ns
    return None


def analyse(scenario: ChaosScenario, topology: str, records: list[RequestRecord],
            reference: list[RequestRecord] | None, injections: list[Injection],
            samples: list[Sample]) -> ChaosOutcome:
    expected = scenario.workload.output_tokens.mean
    by_session = {r.session: r.output_tokens for r in reference or []
                  if r.error is None and r.output_tokens is not None}
    completed = [r for r in records if r.error is None]
    truncated = [r for r in completed if (r.output_tokens or 0) < expected]
    compared = [r for r in completed if r.session in by_session]
    mismatched = [r for r in compared if r.output_tokens != by_session[r.session]]
    run_end = max((r.end_ns for r in records), default=0)
    run_start = min((r.start_ns for r in records), default=0)
    reports, windows = [], []
    for inj in injections:
        start, end = inj.started_ns, recovery_ns(inj, samples)
        stop = end if end is not None else max(run_end, inj.ended_ns)
        windows.append((start, stop))
        reports.append(FaultReport(
            process=inj.fault.target, action=inj.fault.action.value, at_s=inj.fault.at_s,
            pid=inj.pid, recovery_s=None if end is None else (end - start) / 1e9,
            failed_requests=sum(1 for r in records
                                if r.error is not None and start <= r.end_ns <= stop)))
    degraded_ns = _union_length(windows)
    good = [r for r in records if _good(r, scenario, expected)]
    in_windows = [r for r in good if any(a <= r.end_ns <= b for a, b in windows)]
    kinds: dict[str, int] = {}
    for r in records:
        if r.error is not None:
            kinds[r.error] = kinds.get(r.error, 0) + 1
    outcome = ChaosOutcome(
        scenario=scenario.name, topology=topology, requests=len(records),
        failed=len(records) - len(completed), truncated=len(truncated),
        mismatched=len(mismatched), compared=len(compared),
        reference_failed=None if reference is None else sum(r.error is not None
                                                            for r in reference),
        faults=reports,
        goodput_rps=len(good) / max(1e-9, (run_end - run_start) / 1e9) if records else 0.0,
        goodput_degraded_rps=len(in_windows) / (degraded_ns / 1e9) if degraded_ns else None,
        degraded_s=degraded_ns / 1e9, error_kinds=kinds, violations=[])
    missed = [f for f in scenario.faults if f not in {i.fault for i in injections}]
    return outcome.model_copy(update={"violations": violations(scenario, outcome, missed)})


def _union_length(windows: list[tuple[int, int]]) -> int:
    total, reach = 0, None
    for start, stop in sorted(windows):
        if reach is None or start > reach:
            total += stop - start
            reach = stop
        elif stop > reach:
            total += stop - reach
            reach = stop
    return total


def violations(scenario: ChaosScenario, outcome: ChaosOutcome,
               missed: list[Fault]) -> list[str]:
    limits = scenario.limits
    found = [f"{f.action.value} {f.target} at {f.at_s:g} s was never injected: the load "
             "ended first; give the workload more requests" for f in missed]
    for count, limit, what in ((outcome.failed, limits.max_failed_requests, "failed requests"),
                               (outcome.truncated, limits.max_truncated_streams,
                                "truncated streams"),
                               (outcome.mismatched, limits.max_mismatched_outputs,
                                "outputs that differ from the fault-free run")):
        if count > limit:
            found.append(f"{count} {what} (limit {limit})")
    for fault in outcome.faults:
        if fault.recovery_s is None or fault.recovery_s > limits.max_recovery_s:
            took = "never" if fault.recovery_s is None else f"{fault.recovery_s:.1f} s"
            found.append(f"{fault.action} {fault.process} at {fault.at_s:g} s: recovered "
                         f"{took} (limit {limits.max_recovery_s:g} s)")
    if outcome.reference_failed:
        found.append(f"the fault-free run had {outcome.reference_failed} failed requests: "
                     "the graph or the workload is broken before any fault")
    return found
