"""`dis-serve chaos` end to end: bring the graph up, run the workload fault-free, run it
again while faults hit the graph on schedule, measure, stop the graph, write chaos.json.

Faults are timed from AIPerf's "profiling started" announcement (AIPerf itself takes
seconds to start), so `at_s` means seconds into the measured load.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from ..bench.aiperf_run import AiperfTarget, build_argv, failure_message, run_aiperf
from ..bench.requests import RECORDS_FILE, RequestRecord, read_records
from ..bench.sweep import sweep_lock
from ..bench.target import BenchTarget, make_target, plan_of
from ..errors import RunError, UserInputError
from ..topology import Topology
from .inject import FaultInjector, StatusSampler
from .outcome import ChaosOutcome, analyse, recovery_ns
from .scenario import ChaosScenario

OUTCOME_FILE = "chaos.json"


def check_targets(topo: Topology, scenario: ChaosScenario, source: str | None) -> None:
    """Every fault names a process the graph has (before anything starts)."""
    names = [p.name for p in plan_of(topo).processes]
    for index, fault in enumerate(scenario.faults):
        if fault.process not in names:
            raise UserInputError(f"no process {fault.process!r} in graph {topo.name}",
                                 source=source, key=f"faults[{index}].process",
                                 fix="use one of " + ", ".join(names))


def run_chaos(topo: Topology, scenario: ChaosScenario, out_dir: Path, *,
              topology_file: Path | None = None, run_root: Path | None = None,
              on_event: Callable[[str], None] | None = None) -> ChaosOutcome:
    from ..evidence.fingerprint import capture, write_fingerprint
    from ..launch.graph import start_graph

    say = on_event or (lambda _text: None)
    with sweep_lock(out_dir):
        write_fingerprint(out_dir, capture("chaos", {"topology": (topo, topology_file)},
                                           inputs=scenario))
        say(f"starting graph {topo.name}")
        with start_graph(topo, run_root=run_root) as graph:
            target = make_target(topo, url=graph.endpoint, plan=graph.plan,
                                 tokenizer=graph.plan.model_path, topology_file=topology_file)
            reference = None
            if scenario.reference_run:
                say("fault-free run")
                reference = _run_load(scenario, target, out_dir / "fault-free")
            say("run with faults: " + ", ".join(
                f"{f.action.value} {f.process} at {f.at_s:g} s" for f in scenario.faults_in_order))
            sampler = StatusSampler(graph.status)
            injector = FaultInjector(scenario.faults, lambda name: graph.status().process(
                name).pid)
            sampler.start()
            try:
                records = _run_load(scenario, target, out_dir / "faults",
                                    on_profiling=injector.start)
                injector.stop()
                _wait_recovered(injector, sampler, scenario.limits.max_recovery_s)
            finally:
                injector.stop()
                sampler.stop()
            say(f"stopping graph {topo.name}")
    outcome = analyse(scenario, topo.name, records, reference, injector.injections,
                      sampler.samples)
    (out_dir / OUTCOME_FILE).write_text(outcome.model_dump_json(indent=2), encoding="utf-8")
    return outcome


def _run_load(scenario: ChaosScenario, target: BenchTarget, artifacts: Path,
              on_profiling: Callable[[], None] | None = None) -> list[RequestRecord]:
    work = scenario.workload
    point = work.points()[0]
    aiperf = AiperfTarget(url=target.url, model=target.model, tokenizer=target.tokenizer,
                          tls=target.tls)
    argv = build_argv(work, point, aiperf, artifacts)

    def phase(name: str, event: str) -> None:
        if on_profiling is not None and name == "profiling" and event == "started":
            on_profiling()

    run = run_aiperf(argv, artifacts, timeout_s=work.point_timeout_s, extra_env=aiperf.env,
                     on_phase=phase)
    if not (artifacts / RECORDS_FILE).is_file():
        raise RunError(failure_message(run, point))
    return read_records(artifacts / RECORDS_FILE)


def _wait_recovered(injector: FaultInjector, sampler: StatusSampler, limit_s: float) -> None:
    """Keep watching after the load ended until every fault has recovered, or `limit_s`
    past the last one (a fault late in the run still gets its recovery measured)."""
    if not injector.injections:
        return
    deadline = time.monotonic() + limit_s + 1.0
    while time.monotonic() < deadline:
        samples = list(sampler.samples)
        if all(recovery_ns(inj, samples) is not None for inj in injector.injections):
            return
        time.sleep(0.1)
