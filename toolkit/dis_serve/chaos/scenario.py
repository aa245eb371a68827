"""The chaos scenario schema: a benchmark workload, faults on a schedule, and the limits a
graph must stay within while they happen (what CI gates on)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..bench.scenario import Scenario
from ..launch.faults import FaultAction
from ..topology import is_valid_name


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


# The graph's head node, whatever its name (a scenario runs on Slurm and hosts alike).
HEAD_NODE = "head"


class Fault(_Strict):
    """One fault: what happens to which process, when."""

    at_s: float = Field(ge=0, le=3600, description="Seconds after AIPerf's profiling starts.")
    action: FaultAction = Field(description="kill | term | pause.")
    process: str | None = Field(
        default=None, description="A process of the graph by name: etcd, nats, frontend, "
                                  "prefill-0, decode-1...")
    node: str | None = Field(
        default=None, description="A node of a Slurm or hosts graph, as `status` names it, "
                                  "or `head` for the graph's head node: with process, that "
                                  "process there; alone, every process of the node and its "
                                  "agent (a hung or crashed node).")
    duration_s: float | None = Field(
        default=None, gt=0, le=600, description="pause only: how long it stays stopped.")

    @model_validator(mode="after")
    def _duration_for_pause_only(self) -> Fault:
        if (self.action is FaultAction.PAUSE) != (self.duration_s is not None):
            raise ValueError(f"fault at {self.at_s:g} s: duration_s goes with action pause "
                             "and only with it")
        if self.process is None and self.node is None:
            raise ValueError(f"fault at {self.at_s:g} s: give process, node, or both")
        return self

    @property
    def target(self) -> str:
        """What it hits, for people: `decode-1`, `decode-1 on node2`, `node node2`."""
        if self.process is None:
            return f"node {self.node}"
        return self.process + (f" on {self.node}" if self.node else "")


class ChaosLimits(_Strict):
    """Worst acceptable outcome; `dis-serve chaos` exits 1 past any of them."""

    max_failed_requests: int = Field(default=0, ge=0, description="Requests that errored.")
    max_truncated_streams: int = Field(
        default=0, ge=0, description="Requests that ended without error but short of the "
                                     "tokens they asked for.")
    max_mismatched_outputs: int = Field(
        default=0, ge=0, description="Completed requests whose output token count differs "
                                     "from the fault-free run's for the same request.")
    max_recovery_s: float = Field(
        default=10.0, gt=0, description="Seconds from a fault (from the end of a pause) until "
                                        "the graph is ready again with every process.")


class ChaosScenario(_Strict):
    """A workload run twice against one graph: once fault-free, once with the faults."""

    name: str = Field(description="Scenario name (lower-case letters, digits, dashes).")
    description: str | None = Field(default=None, description="What this scenario checks.")
    workload: Scenario = Field(
        description="A benchmark scenario (as in benchmarks/*.yaml) with one load level "
                    "and a request count, streaming. Prefer a request rate: a closed loop "
                    "(concurrency) resends at once after each failure, so its failure count "
                    "measures the client's retry speed more than the outage.")
    faults: list[Fault] = Field(min_length=1, description="The faults, in any order.")
    limits: ChaosLimits = Field(default_factory=ChaosLimits, description="Pass/fail limits.")
    reference_run: bool = Field(
        default=True, description="Run the workload fault-free first, to compare each "
                                  "request's output token count against.")

    @model_validator(mode="after")
    def _check(self) -> ChaosScenario:
        if not is_valid_name(self.name):
            raise ValueError(f"name {self.name[:60]!r} must be 2-40 lower-case letters, "
                             "digits or dashes, starting with a letter")
        work = self.workload
        if len(work.points()) != 1:
            raise ValueError("workload: give one load level, e.g. request_rate: [20] (open "
                             "loop: failures count the requests a user would have sent) or "
                             "concurrency: [8]")
        if work.requests is None:
            raise ValueError("workload: give requests (the fault-free and the faulty run "
                             "must send the same requests to be compared)")
        if not work.streaming:
            raise ValueError("workload.streaming must be true: truncated streams and "
                             "goodput are measured on streamed responses")
        return self

    @property
    def faults_in_order(self) -> list[Fault]:
        return sorted(self.faults, key=lambda f: f.at_s)


def load_chaos_scenario(path: Path) -> ChaosScenario:
    from ..inputs.yaml_input import load_model_file

    return load_model_file(ChaosScenario, path)
