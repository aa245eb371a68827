"""`up`, `status`, `logs`, `down`: run a graph and find it again from another shell."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from ..errors import RunError, UserInputError
from ..inputs.options import Command
from ..launch.termination import interrupt_on_termination

if TYPE_CHECKING:
    from ..launch.events import SupervisorEvent
    from ..launch.request import DownRequest, LogsRequest, PrepareRequest, StatusRequest, UpRequest
    from ..placements.base import GraphHandle
    from ..placements.reports import ObservedGraph
    from ..security.pki_files import EndpointTls

console = Console(highlight=False, soft_wrap=True)


def _load(file: Path | None):  # -> Topology, imported lazily to keep `--help` light
    from ..builtin import DEMO_TOPOLOGY
    from ..inputs.yaml_input import load_model_file
    from ..topology import Topology

    return load_model_file(Topology, file or DEMO_TOPOLOGY)


def status_table(observed: ObservedGraph) -> Table:
    table = Table(title=f"{observed.name}: {observed.phase.value} ({observed.supervisor})",
                  title_justify="left")
    nodes = any(proc.node is not None for proc in observed.processes)
    why = any(proc.why for proc in observed.processes)
    columns = ("process", *(("node",) if nodes else ()), "pid", "state", "port", "restarts",
               "ready", *(("why",) if why else ()))
    for column in columns:
        table.add_column(column, justify="right" if column in ("pid", "restarts") else "left")
    for proc in observed.processes:
        ports = ", ".join(str(p) for p in proc.ports.values()) or "-"
        state = proc.state.value + (" (new)" if proc.joining else "")
        table.add_row(proc.name, *((proc.node or "-",) if nodes else ()), str(proc.pid or "-"),
                      state, ports, str(proc.restarts), "yes" if proc.ready else "no",
                      *((proc.why or "",) if why else ()))
    return table


def _curl(endpoint: str, model: str, tls: EndpointTls | None = None) -> str:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "w3 w4 w5"}],
                       "max_tokens": 16})
    from ..render.shell_words import curl_tls_words

    return (f"curl -s {curl_tls_words(tls)}{endpoint}/v1/chat/completions "
            f"-H 'Content-Type: application/json' -d {shlex.quote(body)}")


def _print_ready(observed: ObservedGraph) -> None:
    queued = f" (scheduler: {observed.queued_s:.0f} s queued)" if observed.queued_s is not None \
        else ""
    after = observed.ready_after_s or 0.0
    console.print(f"ready in {after:.1f} s{queued}: {observed.endpoint}  (model "
                  f"{observed.model_name}, run dir {observed.run_dir})", markup=False)
    console.print(_curl(observed.endpoint or "", observed.model_name, observed.endpoint_tls),
                  markup=False)


def _print_event(event: SupervisorEvent) -> None:
    """The supervisor's events (crashes, restarts); ready and failure have their own output."""
    from ..launch.events import Failed, Ready, describe

    if not isinstance(event, Ready | Failed):
        console.print(describe(event), markup=False)


def up(request: UpRequest) -> None:
    """Start a graph (etcd, NATS, frontend with router, worker pools) and keep it running."""
    from ..placements.registry import handle_for
    from ..placements.reports import StartOptions

    handle = handle_for(_load(request.file))
    # Ctrl-C stops the graph; so do `dis-serve down` from another shell (SIGTERM) and a
    # closed terminal (SIGHUP). Detached too: until it has handed the graph to its
    # supervisor, this process is what `down` stops.
    interrupt_on_termination()
    detach = request.detach
    report = handle.start(StartOptions(detach=detach, ready_timeout_s=request.timeout,
                                       keep_runs=request.keep_runs, on_event=_print_event))
    for note in report.notes:
        console.print(note, markup=False)
    for warning in report.warnings:
        console.print(f"warning: {warning}", markup=False)
    ready = False
    try:
        observed = _wait_ready_live(handle)
        ready = True
        _print_ready(observed)
        if request.prometheus:
            _start_prometheus(handle.name, request.prometheus_port)
        if detach:
            for line in handle.next_steps():
                console.print(line, markup=False)
            return
        console.print("Ctrl-C stops the graph.", markup=False)
        last = handle.watch(_print_change)
    except KeyboardInterrupt:
        console.print("stopping...", markup=False)
        _stop_with_prometheus(handle)
        if not ready:
            raise  # interrupted before it served: exit 130, not a clean stop
        console.print(f"stopped {handle.name}", markup=False)
        return
    except BaseException:
        if not detach:
            _stop_with_prometheus(handle)
        raise
    stopped = _stop_with_prometheus(handle)
    if last.error:
        raise RunError(last.error)
    for line in stopped.lines:
        console.print(line, markup=False)


def _start_prometheus(name: str, port: int) -> None:
    from ..launch.rundir import RunDir
    from ..observe.prometheus_run import start_prometheus

    record = start_prometheus(RunDir.for_graph(name), port)
    console.print(f"prometheus: {record.url} (config, Grafana dashboards: "
                  f"{RunDir.for_graph(name).path / 'observability'})", markup=False)


def _stop_with_prometheus(handle: GraphHandle):
    """Stop the graph, then the Prometheus `up --prometheus` started beside it (if any)."""
    from ..launch.rundir import RunDir
    from ..observe.prometheus_run import stop_prometheus

    stopped = handle.stop()
    line = stop_prometheus(RunDir.for_graph(handle.name))
    if line:
        console.print(line, markup=False)
    return stopped


def _wait_ready_live(handle: GraphHandle) -> ObservedGraph:
    from rich.live import Live

    with Live(console=console, refresh_per_second=8) as live:
        observed = handle.wait_ready(on_update=lambda o: live.update(status_table(o)))
        live.update(status_table(observed))
    if not console.is_terminal:
        console.line()  # Live leaves its last frame without a newline off a terminal
    return observed


def _print_change(observed: ObservedGraph) -> None:
    """The table again whenever the graph turns degraded or ready again."""
    console.print(status_table(observed))
    for problem in observed.problems:
        console.print(f"degraded: {problem}", markup=False)


def status(request: StatusRequest) -> None:
    """Show a running graph's processes (pid, state, port, restarts, ready), and its worker
    registrations with their leases as the router sees them. Exit status 0 when it is ready
    (or starting, or was stopped cleanly), 3 when degraded, 1 when failed or its supervisor
    is gone."""
    from ..placements.lookup import find_run
    from ..placements.registry import handle_for_run
    from ..placements.reports import StatusVerdict

    handle = handle_for_run(find_run(request.name, active_only=False))
    observed = handle.status()
    if request.as_json:
        console.print_json(observed.model_dump_json())
        raise typer.Exit(observed.verdict.exit_code)
    console.print(status_table(observed))
    if observed.change:
        console.print(observed.change, markup=False)
    if observed.serving:
        router = f"; router: {observed.router}" if observed.router else ""
        console.print(f"serving {observed.model_name} at {observed.endpoint} "
                      f"({observed.supervisor}{router})", markup=False)
        _print_registrations(handle)
    if observed.verdict is not StatusVerdict.OK:
        for problem in observed.problems:
            console.print(f"{observed.phase.value}: {problem}", markup=False)
    if observed.supervisor_gone:
        console.print(f"the {observed.supervisor} is gone; the table is its last record; "
                      f"`dis-serve down {observed.name}` stops anything left", markup=False)
    if observed.error:
        console.print(f"error: {observed.error}", markup=False)
    raise typer.Exit(observed.verdict.exit_code)


def _print_registrations(handle: GraphHandle) -> None:
    """The router's view and each registration's lease (the doctor's, without NATS)."""
    from ..coordination.doctor_view import registrations_table, router_line

    view = handle.registrations()
    report = view.report
    if report is None:
        if view.unavailable:
            console.print(f"router view unavailable: {view.unavailable}", markup=False)
        return
    if report.etcd.error:
        console.print(f"etcd: {report.etcd.error}", markup=False)
        return
    console.print(registrations_table(report))
    console.print(router_line(report), markup=False)
    if report.findings:
        console.print(f"{len(report.findings)} findings: `dis-serve doctor {handle.name}`",
                      markup=False)


def logs(request: LogsRequest) -> None:
    """Print a graph's process logs (Ctrl-C ends --follow)."""
    from ..placements.lookup import find_run
    from ..placements.registry import handle_for_run

    handle = handle_for_run(find_run(request.name, active_only=False))
    names, process = handle.process_names(), request.process
    if process is not None and process not in names:
        raise UserInputError(f"no process {process!r} in graph {handle.name}",
                             fix="use one of " + ", ".join(names))
    chosen = [process] if process else names
    prefix = len(chosen) > 1
    for proc in chosen:
        for line in handle.tail(proc, request.lines):
            console.print(f"{proc} | {line}" if prefix else line, markup=False)
    if request.follow:
        try:
            for proc, line in handle.follow(chosen):
                console.print(f"{proc} | {line}" if prefix else line, markup=False)
        except KeyboardInterrupt:
            return


def down(request: DownRequest) -> None:
    """Stop a graph: frontend, workers, NATS, etcd; nothing it started keeps running."""
    from ..observe.prometheus_run import stop_prometheus
    from ..placements.lookup import active_runs, find_run
    from ..placements.registry import handle_for_run

    name = request.name
    if request.all_graphs:
        runs = active_runs()
        if not runs:
            console.print("no graph is running", markup=False)
    elif name is None and not active_runs():
        console.print("no graph is running", markup=False)
        return
    else:
        runs = [find_run(name)]
    for run in runs:
        for line in handle_for_run(run).stop().lines:
            console.print(line, markup=False)
        if note := stop_prometheus(run):
            console.print(note, markup=False)


def prepare(request: PrepareRequest) -> None:
    """Prepare a hosts graph's run directory to copy to its nodes (node scripts, README,
    cluster plan, topology, the mocker's model card) and print what to run where; then
    `status`, `logs`, `doctor` and `down` find it by name."""
    from ..placements.registry import handle_for

    for line in handle_for(_load(request.file)).prepare(source=str(request.file)):
        console.print(line, markup=False)


COMMANDS = (Command(up, ("dis_serve.launch.request:UpRequest",)),
            Command(prepare, ("dis_serve.launch.request:PrepareRequest",)),
            Command(status, ("dis_serve.launch.request:StatusRequest",)),
            Command(logs, ("dis_serve.launch.request:LogsRequest",)),
            Command(down, ("dis_serve.launch.request:DownRequest",)))
