"""`dis-serve chaos` end to end: bring the graph up (any placement, through its handle), run
the workload fault-free, run it again while faults hit the graph on schedule (a process, a
process on a named node, a whole node), measure, stop the graph, write chaos.json.

The fault-free run is a bench of the graph (bench/runner): its own report under fault-free/,
and the after-bench hooks every measured run gets (the planner's ledger, for a planned
graph). The run with faults is no measurement of the graph's speed and gets neither.

Faults are timed from AIPerf's "profiling started" announcement (AIPerf itself takes
seconds to start), so `at_s` means seconds into the measured load.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..bench.aiperf_run import AiperfTarget, build_argv, failure_message, run_aiperf
from ..bench.requests import RECORDS_FILE, RequestRecord, read_records
from ..bench.runner import AfterBench, BenchRun, measure
from ..bench.sweep import artifact_dir, sweep_lock
from ..bench.target import BenchTarget, make_target, plan_of
from ..errors import RunError, UserInputError
from ..topology import Topology
from .inject import FaultInjector, StatusSampler
from .outcome import ChaosOutcome, analyse, recovery_ns
from .request import ChaosRequest
from .scenario import HEAD_NODE, ChaosScenario

if TYPE_CHECKING:
    from ..launch.rundir import RunDir
    from ..placements.base import GraphHandle
    from ..placements.reports import ObservedGraph

OUTCOME_FILE = "chaos.json"
FAULT_FREE_DIR = "fault-free"


def check_targets(topo: Topology, scenario: ChaosScenario, source: str | None) -> None:
    """Every fault names a process the graph has, and a node it has (before anything
    starts)."""
    from ..render.node_layout import node_layout

    names = [p.name for p in plan_of(topo).processes]
    nodes = [n.name for n in node_layout(topo)] if topo.placement.kind.multi_node else []
    nodes += [HEAD_NODE] if nodes else []
    for index, fault in enumerate(scenario.faults):
        if fault.process is not None and fault.process not in names:
            raise UserInputError(f"no process {fault.process!r} in graph {topo.name}",
                                 source=source, key=f"faults[{index}].process",
                                 fix="use one of " + ", ".join(names))
        if fault.node is not None and fault.node not in nodes:
            raise UserInputError(f"no node {fault.node!r} in graph {topo.name}", source=source,
                                 key=f"faults[{index}].node",
                                 fix=("use one of " + ", ".join(nodes)) if nodes
                                 else "this graph runs on one machine: drop node")


def _node_name(run: RunDir, node: str | None) -> str | None:
    """A fault's node as the graph names it (`head`: its head node)."""
    if node != HEAD_NODE:
        return node
    nodes = run.read_cluster_plan().nodes
    return node if any(n.name == node for n in nodes) else next(n.name for n in nodes
                                                                 if n.head)


def run_chaos(request: ChaosRequest, *, after_bench: Sequence[AfterBench] = (),
              run_root: Path | None = None,
              on_event: Callable[[str], None] | None = None) -> ChaosOutcome:
    """The request's scenario against its topology (the demo graph by default), into its
    `out` (default .dis-serve/chaos/<topology>-<scenario>); every fault's target is checked
    before anything starts."""
    from ..builtin import DEMO_TOPOLOGY
    from ..inputs.yaml_input import load_model_file
    from ..launch.rundir import default_root
    from .scenario import load_chaos_scenario

    scenario = load_chaos_scenario(request.scenario)
    topology_file = request.topology or DEMO_TOPOLOGY
    topo = load_model_file(Topology, topology_file)
    check_targets(topo, scenario, str(request.scenario))
    out_dir = (request.out or default_root() / "chaos" / f"{topo.name}-{scenario.name}")
    return chaos_graph(topo, scenario, out_dir.resolve(), topology_file=topology_file,
                       run_root=run_root, on_event=on_event, after_bench=after_bench)


def chaos_graph(topo: Topology, scenario: ChaosScenario, out_dir: Path, *,
                topology_file: Path | None = None, run_root: Path | None = None,
                on_event: Callable[[str], None] | None = None,
                after_bench: Sequence[AfterBench] = ()) -> ChaosOutcome:
    """On any placement: the graph's handle starts, watches and stops it; faults reach
    its processes where they run (the handle's `fault`)."""
    from ..evidence.fingerprint import capture, write_fingerprint
    from ..placements.registry import handle_for
    from ..placements.reports import StartOptions

    say = on_event or (lambda _text: None)
    with sweep_lock(out_dir):
        write_fingerprint(out_dir, capture("chaos", {"topology": (topo, topology_file)},
                                           inputs=scenario))
        say(f"starting graph {topo.name}")
        handle = handle_for(topo, run_root)
        handle.start(StartOptions())
        try:
            observed = handle.wait_ready()
            target = _target(topo, handle, observed, topology_file)
            records, reference, injector, sampler = _measure(
                handle, scenario, out_dir, target, say, after_bench)
        finally:
            say(f"stopping graph {topo.name}")
            handle.stop()
    if injector.errors:
        raise RunError("faults that could not be applied: " + "; ".join(injector.errors))
    files = {"results": str(out_dir / OUTCOME_FILE)}
    if reference is not None:
        files["fault-free report"] = str(reference.files.markdown)
    outcome = analyse(scenario, topo.name, records,
                      None if reference is None else _records_of(reference, scenario),
                      injector.injections, sampler.samples).model_copy(update={"files": files})
    (out_dir / OUTCOME_FILE).write_text(outcome.model_dump_json(indent=2), encoding="utf-8")
    return outcome


def _target(topo: Topology, handle: GraphHandle, observed: ObservedGraph,
            topology_file: Path | None) -> BenchTarget:
    plan = handle.resolved_plan()
    return make_target(topo, url=observed.endpoint or plan.endpoint, plan=plan,
                       tokenizer=plan.model_path, topology_file=topology_file)


def _measure(handle: GraphHandle, scenario: ChaosScenario, out_dir: Path, target: BenchTarget,
             say: Callable[[str], None], after_bench: Sequence[AfterBench]):
    """The fault-free run (if asked), then the run with faults, sampling the status."""
    from ..launch.faults import FaultOrder

    reference = None
    if scenario.reference_run:
        say("fault-free run")
        reference = _fault_free(scenario, target, out_dir / FAULT_FREE_DIR, after_bench)
        for note in reference.notes:
            say(note)
    say("run with faults: " + ", ".join(
        f"{f.action.value} {f.target} at {f.at_s:g} s" for f in scenario.faults_in_order))
    sampler = StatusSampler(handle.status)
    faults = [f.model_copy(update={"node": _node_name(handle.run, f.node)})
              for f in scenario.faults]
    injector = FaultInjector(
        faults, lambda name: _pid_of(handle, name),
        lambda f: handle.fault(FaultOrder(action=f.action, process=f.process, node=f.node,
                                            duration_s=f.duration_s), lambda _text: None))
    sampler.start()
    try:
        records = _run_load(scenario, target, out_dir / "faults", on_profiling=injector.start)
        injector.stop()
        _wait_recovered(injector, sampler, scenario.limits.max_recovery_s)
    finally:
        injector.stop()
        sampler.stop()
    return records, reference, injector, sampler


def _fault_free(scenario: ChaosScenario, target: BenchTarget, out_dir: Path,
                after_bench: Sequence[AfterBench]) -> BenchRun:
    """The workload as a bench of the graph just started: measured afresh, never a point an
    earlier run into the same directory left."""
    shutil.rmtree(out_dir, ignore_errors=True)
    return measure(scenario.workload, target, out_dir, after_bench=after_bench)


def _records_of(reference: BenchRun, scenario: ChaosScenario) -> list[RequestRecord]:
    point = scenario.workload.points()[0]
    return read_records(artifact_dir(reference.out_dir, point) / RECORDS_FILE)


def _pid_of(handle: GraphHandle, name: str) -> int | None:
    return next((p.pid for p in handle.status().processes if p.name == name), None)


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
