"""`up`, `status`, `logs`, `down`: run a graph and find it again from another shell."""

from __future__ import annotations

import json
import queue
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..errors import RunError, UserInputError
from .signals import interrupt_on_termination

if TYPE_CHECKING:
    from ..launch.rundir import RunDir
    from ..launch.status import GraphStatus

console = Console(highlight=False, soft_wrap=True)


def _load(file: Path | None):  # -> Topology, imported lazily to keep `--help` light
    from ..builtin import DEMO_TOPOLOGY
    from ..topology import Topology
    from ..yaml_input import load_model_file

    return load_model_file(Topology, file or DEMO_TOPOLOGY)


def status_table(status: GraphStatus, *, check_pids: bool = False) -> Table:
    from ..launch.process import same_process

    table = Table(title=f"{status.name}: {status.phase.value}", title_justify="left")
    for column in ("process", "pid", "state", "port", "restarts", "ready"):
        table.add_column(column, justify="right" if column in ("pid", "restarts") else "left")
    for proc in status.processes:
        state, ready = proc.state.value, proc.ready
        # The record may be stale (its supervisor killed): say what is true now.
        if check_pids and proc.state.alive and not same_process(proc.pid or 0, proc.create_time):
            state, ready = "gone", False
        ports = ", ".join(str(p) for p in proc.ports.values()) or "-"
        table.add_row(proc.name, str(proc.pid or "-"), state, ports, str(proc.restarts),
                      "yes" if ready else "no")
    return table


def _curl(endpoint: str, model: str) -> str:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "w3 w4 w5"}],
                       "max_tokens": 16})
    return (f"curl -s {endpoint}/v1/chat/completions -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)}")


def _print_ready(status: GraphStatus) -> None:
    console.print(f"ready in {status.ready_after_s:.1f} s: {status.endpoint}  "
                  f"(model {status.model_name}, run dir {status.run_dir})", markup=False)
    console.print(_curl(status.endpoint, status.model_name), markup=False)


def _print_preparation(prepared) -> None:  # PreparedRun
    if prepared.cleaned:
        names = ", ".join(item.name for item in prepared.cleaned)
        console.print(f"cleaned up processes a previous supervisor left running: {names}",
                      markup=False)
    for warning in prepared.warnings:
        console.print(f"warning: {warning}", markup=False)


def up(
    file: Annotated[Path | None, typer.Argument(
        help="Topology YAML (default: the built-in demo graph).")] = None,
    detach: Annotated[bool, typer.Option(
        "--detach", "-d", help="Return once ready; the graph keeps running in the "
                               "background until `dis-serve down`.")] = False,
    timeout: Annotated[float | None, typer.Option(
        help="Seconds to wait for the graph to be ready (default: the workers' startup "
             "budget for this backend and model size).", min=1)] = None,
    keep_runs: Annotated[int, typer.Option(
        "--keep-runs", help="Earlier runs whose logs and last state are kept in the run "
                            "directory's previous/ (0: none).", min=0)] = 3,
) -> None:
    """Start a graph (etcd, NATS, frontend with router, worker pools) and keep it running."""
    topo = _load(file)
    from ..topology import PlacementKind

    if topo.placement.kind is PlacementKind.SLURM:
        from . import slurm_cmds

        slurm_cmds.up(topo, timeout, detach)
        return
    if detach:
        _up_detached(topo, timeout, keep_runs)
    else:
        _up_foreground(topo, timeout, keep_runs)


def _up_detached(topo, timeout: float | None, keep_runs: int) -> None:
    from ..launch.daemon import start_detached

    status, prepared = start_detached(topo, ready_timeout_s=timeout, keep_runs=keep_runs)
    _print_preparation(prepared)
    console.print(status_table(status))
    _print_ready(status)
    console.print(f"next: dis-serve status {status.name} | dis-serve logs frontend --name "
                  f"{status.name} | dis-serve down {status.name}", markup=False)


def _up_foreground(topo, timeout: float | None, keep_runs: int) -> None:
    from rich.live import Live

    from ..launch.graph import launch_graph

    # Ctrl-C stops the graph; so do `dis-serve down` from another shell (SIGTERM) and a
    # closed terminal (SIGHUP).
    interrupt_on_termination()
    events: queue.Queue[str] = queue.Queue()
    graph = launch_graph(topo, ready_timeout_s=timeout, on_event=events.put,
                         keep_runs=keep_runs)
    _print_preparation(graph.prepared)
    supervisor = graph.supervisor
    try:
        with Live(status_table(graph.status()), console=console, refresh_per_second=8) as live:
            while not supervisor.ready.wait(0.1) and not supervisor.finished.is_set():
                live.update(status_table(graph.status()))
            live.update(status_table(graph.status()))
        if not console.is_terminal:
            console.line()  # Live leaves its last frame without a newline off a terminal
        if supervisor.ready.is_set() and not supervisor.finished.is_set():
            _print_ready(graph.status())
            console.print("Ctrl-C stops the graph.", markup=False)
        _follow_phase(graph, events)
    except KeyboardInterrupt:
        console.print("stopping...", markup=False)
        if not supervisor.ready.is_set():
            graph.stop()
            raise  # interrupted before it served: exit 130, not a clean stop
    finally:
        graph.stop()
    if graph.error:
        raise RunError(graph.error)
    console.print(f"stopped {topo.name}", markup=False)


def _follow_phase(graph, events: queue.Queue[str]) -> None:  # RunningGraph
    """Until the graph stops: the supervisor's events, and the table again whenever the
    graph turns degraded or ready again."""
    shown = graph.status().phase
    while not graph.supervisor.finished.wait(0.2):
        _drain(events)
        status = graph.status()
        if status.phase is not shown and status.phase.serving:
            shown = status.phase
            console.print(status_table(status))
            for problem in status.problems:
                console.print(f"degraded: {problem}", markup=False)


def _drain(events: queue.Queue[str]) -> None:
    """Print the supervisor's events (crashes, restarts); ready and failure have their own
    output."""
    while True:
        try:
            message = events.get_nowait()
        except queue.Empty:
            return
        if not message.startswith(("ready", "failed")):
            console.print(message, markup=False)


EXIT_FAILED = 1
EXIT_DEGRADED = 3


def status(
    name: Annotated[str | None, typer.Argument(
        help="Graph name (default: the only running graph).")] = None,
) -> None:
    """Show a running graph's processes (pid, state, port, restarts, ready), and its worker
    registrations with their leases as the router sees them. Exit status 0 when it is ready
    (or starting, or was stopped cleanly), 3 when degraded, 1 when failed or its supervisor
    is gone."""
    from ..launch.control import find_run, supervisor_alive
    from ..launch.status import GraphPhase

    run = find_run(name, active_only=False)
    if (job := _slurm_job(run)) is not None:
        from . import slurm_cmds

        slurm_cmds.status(run, job)
        return
    state = run.read_state()
    if state is None:
        raise UserInputError(f"graph {run.name!r} has no recorded state in {run.path}",
                             fix="start it with `dis-serve up`")
    console.print(status_table(state, check_pids=True))
    alive = supervisor_alive(state)
    code = 0
    if alive and state.phase.serving:
        console.print(f"serving {state.model_name} at {state.endpoint} (supervisor pid "
                      f"{state.supervisor_pid})", markup=False)
        _print_router_and_leases(run)
    if alive and state.phase is GraphPhase.DEGRADED:
        code = EXIT_DEGRADED
        for problem in state.problems:
            console.print(f"degraded: {problem}", markup=False)
    elif not alive and not state.phase.finished:
        code = EXIT_FAILED
        console.print(f"the supervisor (pid {state.supervisor_pid}) is gone; the table is its "
                      f"last record; `dis-serve down {state.name}` stops anything left",
                      markup=False)
    if state.phase is GraphPhase.FAILED:
        code = EXIT_FAILED
    if state.error:
        console.print(f"error: {state.error}", markup=False)
    raise typer.Exit(code)


def _print_router_and_leases(run: RunDir) -> None:
    """The router's view and each registration's lease: the doctor's code, without NATS."""
    from dataclasses import replace

    from ..coordination.doctor import run_doctor, target_for_run
    from .doctor_cmds import registrations_table, router_line

    try:
        target = target_for_run(run)
    except OSError as exc:  # the run directory's inputs were removed while it runs
        console.print(f"router view unavailable: {exc}", markup=False)
        return
    report = run_doctor(replace(target, nats_url=None))
    if report.etcd.error:
        console.print(f"etcd: {report.etcd.error}", markup=False)
        return
    console.print(registrations_table(report))
    console.print(router_line(report), markup=False)
    if report.findings:
        console.print(f"{len(report.findings)} findings: `dis-serve doctor {run.name}`",
                      markup=False)


def logs(
    process: Annotated[str | None, typer.Argument(
        help="Process name (etcd, nats, frontend, prefill-0...; default: all).")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Keep printing new lines.")]
    = False,
    name: Annotated[str | None, typer.Option(
        "--name", help="Graph name (default: the only running graph).")] = None,
    lines: Annotated[int, typer.Option("--lines", "-n", help="Lines to show first.", min=0)]
    = 40,
) -> None:
    """Print a graph's process logs (Ctrl-C ends --follow)."""
    from ..launch.control import find_run

    run = find_run(name, active_only=False)
    names = _process_names(run)
    if process is not None and process not in names:
        raise UserInputError(f"no process {process!r} in graph {run.name}",
                             fix="use one of " + ", ".join(names))
    chosen = [process] if process else names
    prefix = len(chosen) > 1
    for proc in chosen:
        for line in run.tail(proc, lines):
            console.print(f"{proc} | {line}" if prefix else line, markup=False)
    if follow:
        _follow(run, chosen, prefix)


def _slurm_job(run: RunDir):  # -> SlurmJob | None
    from ..launch.slurm_record import read_job

    return read_job(run)


def _process_names(run: RunDir) -> list[str]:
    if (job := _slurm_job(run)) is not None:
        return [*job.processes, f"slurm-{job.job_id}"]
    state = run.read_state()
    if state is not None:
        return [p.name for p in state.processes] + ["supervisor"]
    return sorted(p.stem for p in run.logs.glob("*.log"))


def _follow(run: RunDir, names: list[str], prefix: bool) -> None:
    try:
        for proc, line in run.follow(names):
            console.print(f"{proc} | {line}" if prefix else line, markup=False)
    except KeyboardInterrupt:
        return


def down(
    name: Annotated[str | None, typer.Argument(
        help="Graph name (default: the only running graph).")] = None,
    all_graphs: Annotated[bool, typer.Option("--all", help="Stop every running graph.")]
    = False,
) -> None:
    """Stop a graph: frontend, workers, NATS, etcd; nothing it started keeps running."""
    from ..launch.control import active_runs, find_run, stop_run

    if all_graphs:
        runs = active_runs()
        if not runs:
            console.print("no graph is running", markup=False)
    elif name is None and not active_runs():
        console.print("no graph is running", markup=False)
        return
    else:
        runs = [find_run(name)]
    for run in runs:
        if (job := _slurm_job(run)) is not None:
            from . import slurm_cmds

            slurm_cmds.down(run, job)
            continue
        result = stop_run(run)
        if result.had_supervisor:
            console.print(f"stopped {result.name} (supervisor exited after "
                          f"{result.supervisor_exit_s:.1f} s)", markup=False)
        if result.leftovers:
            names = ", ".join(item.name for item in result.leftovers)
            what = "left running" if result.had_supervisor else "left by a dead supervisor"
            console.print(f"{result.name}: stopped processes {what}: {names}", markup=False)
        elif result.stale:
            console.print(f"{result.name}: its supervisor had died and none of its processes "
                          "were left; marked stopped", markup=False)
        elif not result.had_supervisor:
            console.print(f"{result.name} is not running", markup=False)
        if result.shared_keys_deleted or result.shared_streams_deleted:
            console.print(f"{result.name}: removed {result.shared_keys_deleted} etcd keys and "
                          f"{len(result.shared_streams_deleted)} JetStream streams its "
                          "namespace left on the shared etcd/NATS", markup=False)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    for command in (up, status, logs, down):
        app.command()(command)
