"""`chaos`: run a workload against a graph while faults hit it, and gate on the damage."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from ..errors import DisServeError
from ..termination import interrupt_on_termination

if TYPE_CHECKING:
    from ..chaos.outcome import ChaosOutcome

console = Console(highlight=False, soft_wrap=True)


class ChaosLimitExceeded(DisServeError):
    """A chaos run went past a limit of its scenario. Exit code 1."""

    exit_code = 1


def chaos(
    topology: Annotated[Path | None, typer.Argument(
        help="Topology to bring up and hurt (default: the demo graph).")] = None,
    scenario: Annotated[Path, typer.Option(
        "--scenario", help="Chaos scenario YAML (benchmarks/chaos-demo.yaml).")] = ...,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Output directory (default .dis-serve/chaos/<topology>-<scenario>).")]
    = None,
) -> None:
    """Run a workload fault-free, then again while killing or pausing processes on a
    schedule; report failed requests, truncated streams, recovery times, goodput while
    degraded, and output mismatches; exit 1 past a limit of the scenario."""
    from ..builtin import DEMO_TOPOLOGY
    from ..chaos.runner import check_targets, run_chaos
    from ..chaos.scenario import load_chaos_scenario
    from ..launch.rundir import default_root
    from ..topology import Topology
    from ..yaml_input import load_model_file

    interrupt_on_termination()
    spec = load_chaos_scenario(scenario)
    topo_path = topology or DEMO_TOPOLOGY
    topo = load_model_file(Topology, topo_path)
    check_targets(topo, spec, str(scenario))
    out_dir = (out or default_root() / "chaos" / f"{topo.name}-{spec.name}").resolve()
    outcome = run_chaos(topo, spec, out_dir, topology_file=topo_path,
                        on_event=lambda text: console.print(text, markup=False))
    console.print(_table(outcome))
    console.print(f"results: {out_dir / 'chaos.json'}", markup=False)
    if not outcome.passed:
        raise ChaosLimitExceeded(f"{spec.name}: " + "; ".join(outcome.violations))
    console.print(f"passed: every limit of {scenario} held", markup=False)


def _table(outcome: ChaosOutcome):
    from rich.table import Table

    table = Table(title=f"chaos {outcome.scenario} on {outcome.topology}: {outcome.requests} "
                        f"requests, {outcome.failed} failed, {outcome.truncated} truncated, "
                        f"{outcome.mismatched}/{outcome.compared} outputs differ",
                  title_justify="left")
    for column in ("fault", "at s", "pid", "recovered after s", "failed requests"):
        table.add_column(column, justify="left" if column == "fault" else "right")
    for fault in outcome.faults:
        table.add_row(f"{fault.action} {fault.process}", f"{fault.at_s:g}",
                      str(fault.pid or "-"),
                      "never" if fault.recovery_s is None else f"{fault.recovery_s:.2f}",
                      str(fault.failed_requests))
    degraded = ("n/a" if outcome.goodput_degraded_rps is None
                else f"{outcome.goodput_degraded_rps:.2f}")
    table.caption = (f"goodput {outcome.goodput_rps:.2f} req/s overall, {degraded} req/s "
                     f"while degraded ({outcome.degraded_s:.1f} s)")
    return table


class _Action(StrEnum):  # FaultAction's values, without importing it for `--help`
    KILL = "kill"
    TERM = "term"
    PAUSE = "pause"


def fault(
    name: Annotated[str | None, typer.Argument(
        help="Graph name (default: the only running graph).")] = None,
    process: Annotated[str | None, typer.Option(
        "--process", help="The process to hit (default with --node: every process of the "
                          "node and its agent).")] = None,
    node: Annotated[str | None, typer.Option(
        "--node", help="The node (as `status` names it) of a Slurm or hosts graph.")] = None,
    action: Annotated[_Action, typer.Option(
        "--action", help="kill: SIGKILL (a crash), term: SIGTERM, pause: SIGSTOP for "
                         "--duration, then SIGCONT (a hung process or node).")] = _Action.KILL,
    duration: Annotated[float | None, typer.Option(
        "--duration", min=0.1, max=600, help="pause only: seconds it stays stopped.")] = None,
) -> None:
    """Hit a running graph now: one process (on a named node), or a whole node. Returns
    once the fault is over (after the SIGCONT of a pause)."""
    from ..errors import UserInputError
    from ..launch.faults import FaultAction, FaultRequest
    from ..placements.lookup import find_run
    from ..placements.registry import handle_for_run

    chosen = FaultAction(action.value)
    if (chosen is FaultAction.PAUSE) != (duration is not None):
        raise UserInputError("--duration goes with --action pause and only with it",
                             key="--duration", fix="give both, or neither")
    run = find_run(name)
    request = FaultRequest(action=chosen, process=process, node=node, duration_s=duration)
    hit = handle_for_run(run).fault(request, lambda text: console.print(text, markup=False))
    what = process or f"every process of node {hit}"
    console.print(f"{chosen.value} {what}" + (f" on {hit}" if hit and process else "")
                  + f" of {run.name}: done; `dis-serve status {run.name}` shows the graph",
                  markup=False)


def register(app: typer.Typer) -> None:
    app.command()(chaos)
    app.command()(fault)
