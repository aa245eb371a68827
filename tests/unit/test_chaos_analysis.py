"""`dis-serve chaos`: its scenario rules and how a run's records become the verdict."""

from __future__ import annotations

import yaml

from conftest import REPO, assert_one_line_error
from dis_serve.bench.requests import RequestRecord
from dis_serve.chaos.inject import Injection, Sample
from dis_serve.chaos.outcome import analyse
from dis_serve.chaos.scenario import ChaosScenario, Fault, FaultAction, load_chaos_scenario

CHAOS_DEMO = REPO / "benchmarks" / "chaos-demo.yaml"
S = 1_000_000_000  # one second in ns


def _scenario(**limits) -> ChaosScenario:
    data = yaml.safe_load(CHAOS_DEMO.read_text())
    data["limits"] |= limits
    return ChaosScenario.model_validate(data)


def _record(session: int, start_s: float, *, error: str | None = None,
            tokens: int | None = 48) -> RequestRecord:
    return RequestRecord(input_tokens=64, ttft_ms=50.0, itl_ms=5.0, good=error is None,
                         start_ns=int(start_s * S), failed=error is not None, session=session,
                         end_ns=int((start_s + 0.5) * S), error=error,
                         output_tokens=None if error else tokens)


def _kill(process: str, at_s: float, pid: int = 100) -> Injection:
    return Injection(Fault(at_s=at_s, action=FaultAction.KILL, process=process), pid,
                     int(at_s * S), int(at_s * S))


def _sample(at_s: float, serving: bool, pid: int) -> Sample:
    return Sample(at_ns=int(at_s * S), serving=serving, pids={"etcd": pid})


def test_the_ci_scenario_is_valid():
    assert load_chaos_scenario(CHAOS_DEMO).workload.points()[0].value == 20


def test_recovery_waits_for_a_new_pid_not_for_the_first_ready_sample():
    scenario = _scenario(max_recovery_s=10)
    fault = _kill("etcd", 2)
    samples = [_sample(2.1, True, 100), _sample(3.0, False, 200), _sample(4.5, True, 200)]
    outcome = analyse(scenario.model_copy(update={"faults": [fault.fault]}), "demo",
                      [_record(i, i * 0.5) for i in range(10)], None, [fault], samples)
    assert outcome.faults[0].recovery_s == 2.5
    assert outcome.passed, outcome.violations


def test_failed_truncated_and_mismatched_requests_are_counted_against_the_limits():
    scenario = _scenario(max_failed_requests=0, max_truncated_streams=0,
                         max_mismatched_outputs=0)
    reference = [_record(i, 0) for i in range(4)]
    records = [_record(0, 0), _record(1, 0, error="ClientPayloadError"),
               _record(2, 0, tokens=20), _record(3, 0, tokens=49)]
    outcome = analyse(scenario.model_copy(update={"faults": []}), "demo", records, reference,
                      [], [])
    assert (outcome.failed, outcome.truncated, outcome.mismatched) == (1, 1, 2)
    assert outcome.violations == [
        "1 failed requests (limit 0)", "1 truncated streams (limit 0)",
        "2 outputs that differ from the fault-free run (limit 0)"]


def test_a_fault_that_never_recovers_or_never_happened_fails_the_run():
    scenario = _scenario(max_failed_requests=100)
    fault = _kill("etcd", 2)
    outcome = analyse(scenario, "demo", [_record(0, 0)], None, [fault],
                      [_sample(3, False, 100)])
    assert any("kill etcd at 2 s: recovered never" in v for v in outcome.violations)
    assert any("kill nats at 6 s was never injected" in v for v in outcome.violations)


def test_a_pause_needs_a_duration(run_cli, tmp_path):
    data = yaml.safe_load(CHAOS_DEMO.read_text())
    data["faults"] = [{"at_s": 1, "action": "pause", "process": "decode-0"}]
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_one_line_error(run_cli("chaos", "--scenario", path), "c.yaml",
                          "duration_s goes with action pause")


def test_a_fault_on_a_process_the_graph_lacks_names_the_real_ones(run_cli, tmp_path):
    data = yaml.safe_load(CHAOS_DEMO.read_text())
    data["faults"][0]["process"] = "decode-7"
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_one_line_error(run_cli("chaos", "--scenario", path), "faults[0].process",
                          "decode-7", "prefill-0")


def test_a_node_killed_outright_recovers_once_the_graph_serves_without_it():
    scenario = _scenario(max_recovery_s=10)
    lost = Injection(Fault(at_s=2, action=FaultAction.KILL, node="node0"), None, 2 * S, 2 * S)
    samples = [Sample(at_ns=int(3.0 * S), serving=False, pids={}),
               Sample(at_ns=int(8.5 * S), serving=False, pids={},
                      lost_nodes=frozenset({"node0"}))]
    outcome = analyse(scenario.model_copy(update={"faults": [lost.fault]}), "demo",
                      [_record(i, i * 0.5) for i in range(10)], None, [lost], samples)
    assert outcome.faults[0].recovery_s == 6.5
