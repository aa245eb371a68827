"""`chaos`: run a workload against a graph while faults hit it, and gate on the damage."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..inputs.options import Command
from ..launch.termination import interrupt_on_termination

if TYPE_CHECKING:
    from ..chaos.outcome import ChaosOutcome
    from ..chaos.request import ChaosRequest, FaultRequest

console = Console(highlight=False, soft_wrap=True)


def chaos(request: ChaosRequest) -> None:
    """Run a workload fault-free, then again while killing or pausing processes on a
    schedule; report failed requests, truncated streams, recovery times, goodput while
    degraded, and output mismatches; exit 1 past a limit of the scenario."""
    from ..workflows import run_chaos

    interrupt_on_termination()
    outcome = run_chaos(request, on_event=lambda text: console.print(text, markup=False))
    console.print(_table(outcome))
    for what, path in outcome.files.items():
        console.print(f"{what}: {path}", markup=False)
    outcome.enforce()  # exit 1 past a limit
    console.print(f"passed: every limit of {request.scenario} held", markup=False)


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


def fault(request: FaultRequest) -> None:
    """Hit a running graph now: one process (on a named node), or a whole node. Returns
    once the fault is over (after the SIGCONT of a pause)."""
    from ..launch.faults import FaultOrder
    from ..placements.lookup import find_run
    from ..placements.registry import handle_for_run

    run = find_run(request.name)
    order = FaultOrder(action=request.action, process=request.process, node=request.node,
                       duration_s=request.duration)
    hit = handle_for_run(run).fault(order, lambda text: console.print(text, markup=False))
    what = request.process or f"every process of node {hit}"
    console.print(f"{request.action.value} {what}"
                  + (f" on {hit}" if hit and request.process else "")
                  + f" of {run.name}: done; `dis-serve status {run.name}` shows the graph",
                  markup=False)


COMMANDS = (Command(chaos, ("dis_serve.chaos.request:ChaosRequest",)),
            Command(fault, ("dis_serve.chaos.request:FaultRequest",)))
