"""`doctor`: look inside a graph's coordination plane (etcd, NATS, per-pool traffic)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING

import typer
from rich.console import Console, Group
from rich.table import Table

from ..coordination.doctor_view import cells, registrations_table, router_line
from ..errors import PreflightError, UserInputError
from ..inputs.options import Command

if TYPE_CHECKING:
    from ..coordination.doctor import DoctorReport, DoctorTarget
    from ..coordination.doctor_request import DoctorRequest
    from ..launch.rundir import RunDir

console = Console(highlight=False, soft_wrap=True)


def nats_lines(report: DoctorReport) -> list[str]:
    nats = report.nats
    if nats is None:
        return ["NATS: not used by this graph"]
    if nats.error:
        return [f"NATS {nats.url}: {nats.error}"]
    js = "JetStream on" if nats.jetstream else "JetStream off"
    lines = [f"NATS {nats.url}: nats-server {nats.server_version}, {js}, "
             f"{len(nats.streams)} namespace streams, "
             f"{sum(nats.subjects.values())} messages on {len(nats.subjects)} subjects "
             f"in {nats.window_s:g} s"]
    component = {r.instance_id: r.component for r in report.etcd.registrations}
    workers = {pub: f"{component.get(worker, '?')}/{worker}"
               for pub, worker in report.etcd.kv_publishers.items()}
    rates = [f"{workers.get(pub, 'publisher ' + pub)}: {count} ({count / nats.window_s:.1f}/s)"
             for pub, count in sorted(nats.kv_events.items())]
    rates += [f"{workers[pub]}: 0" for pub in sorted(set(workers) - set(nats.kv_events))]
    elsewhere = [t for t in report.etcd.kv_event_transports if t.lower() != "nats"]
    if elsewhere:
        lines.append(f"KV events travel over {', '.join(elsewhere)}, not NATS: their rate is "
                     "not visible here")
    else:
        lines.append(f"KV events in the last {nats.window_s:g} s per publishing worker: "
                     + (", ".join(rates) or "no publisher"))
    for stream in nats.streams:
        lag = ", ".join(f"{c} lag {n}" for c, n in stream.consumers.items()) or "no consumers"
        lines.append(f"stream {stream.name} ({', '.join(stream.subjects)}): "
                     f"{stream.messages} messages; {lag}")
    return lines


def findings_table(report: DoctorReport) -> Table:
    table = Table(title=f"{len(report.findings)} findings", title_justify="left")
    for column in ("finding", "about", "what", "likely cause", "fix"):
        table.add_column(column, overflow="fold")
    for f in report.findings:
        table.add_row(*cells(f.code.value, f.subject, f.message, f.cause, f.fix))
    return table


def render(report: DoctorReport) -> Group:
    from rich.text import Text

    head = f"{report.graph or report.namespace}: " + (
        "healthy" if report.healthy else f"{len(report.findings)} findings")
    parts: list = [Text(head)]
    if report.change:
        parts.append(Text(report.change))
    if report.etcd.error is None:
        parts += [registrations_table(report), Text(router_line(report))]
    parts += [Text(line) for line in nats_lines(report)]
    if report.findings:
        parts.append(findings_table(report))
    return Group(*parts)


def _must_be_running(run: RunDir) -> None:
    """Whatever runs it (a supervisor here, a Slurm job, the agents of a hosts graph)."""
    from ..placements.registry import handle_for_run

    observed = handle_for_run(run).status()
    if not observed.supervisor_alive or observed.phase.finished:
        raise UserInputError(f"graph {run.name!r} is not running", key="NAME",
                             fix="start it with `dis-serve up`; for what a crashed graph "
                                 "left on a shared etcd/NATS use --clean NS --etcd URL")


def resolve_target(request: DoctorRequest) -> DoctorTarget:
    """Our graph by name (or the only running one), or any deployment by its URLs."""
    from ..coordination.doctor import DoctorTarget
    from ..placements.lookup import doctor_target, find_run

    name, etcd, nats, frontend = request.name, request.etcd, request.nats, request.frontend
    namespace = request.namespace or request.clean
    by_url = etcd is not None or namespace is not None
    if name is not None and by_url:
        raise UserInputError("a graph name and --etcd/--namespace were both given",
                             key="NAME", fix="give one: a graph name, or --etcd URL "
                                             "--namespace NS for any Dynamo deployment")
    if not by_url:
        # Extra --metrics: workers outside the plan (one started by hand in its namespace).
        run = find_run(name, active_only=False)
        _must_be_running(run)
        target = doctor_target(run)
        return replace(target, worker_metrics=target.worker_metrics + list(request.metrics))
    if etcd is None or namespace is None:
        missing = "--etcd" if etcd is None else "--namespace"
        raise UserInputError(f"{missing} is missing", key=missing,
                             fix="--etcd http://HOST:2379 and --namespace NS go together")
    return DoctorTarget(
        namespace=namespace, etcd_url=etcd, nats_url=nats,
        frontend_metrics=frontend.rstrip("/") + "/metrics" if frontend else None,
        worker_metrics=list(request.metrics))


def doctor(request: DoctorRequest) -> None:
    """Look inside a graph's coordination plane: etcd registrations and leases, NATS and KV
    events, per-pool traffic. Exit 0 healthy, 1 findings, 2 bad input."""
    target = resolve_target(request)
    if request.clean is not None:
        _clean(target, request.clean, request.yes)
        return
    if request.watch:
        _watch(target, request.window, request.interval, request.count)
    report = _run(target, request.window)
    if request.as_json:
        console.print_json(report.model_dump_json(), indent=2)
    else:
        console.print(render(report))
    raise typer.Exit(0 if report.healthy else 1)


def _run(target: DoctorTarget, window: float) -> DoctorReport:
    from ..coordination.doctor import run_doctor

    return run_doctor(target, window_s=window)


def _watch(target: DoctorTarget, window: float, interval: float, count: int | None) -> None:
    """On a terminal the report redraws in place; piped, each report follows the last (a log
    a script can read as it grows)."""
    from rich.live import Live

    healthy = False
    live = Live(console=console, auto_refresh=False) if console.is_terminal else nullcontext()
    try:
        with live:
            for report, view in _reports(target, window, interval, count):
                healthy = report.healthy
                if isinstance(live, Live):
                    live.update(view, refresh=True)
                else:
                    console.print(view)
    except KeyboardInterrupt:
        pass
    raise typer.Exit(0 if healthy else 1)


def _reports(target: DoctorTarget, window: float, interval: float,
             count: int | None) -> Iterator[tuple[DoctorReport, Group]]:
    from rich.text import Text

    shown = 0
    while count is None or shown < count:
        if shown:
            time.sleep(interval)
        report = _run(target, window)
        shown += 1
        of = f" of {count}" if count else ""
        line = Text(f"report {shown}{of} at {time.strftime('%H:%M:%S')}, every {interval:g} s")
        yield report, Group(line, render(report))


def _clean(target: DoctorTarget, namespace: str, yes: bool) -> None:
    from ..coordination.cleanup import apply_cleanup, live_registrations, plan_cleanup

    try:
        live = live_registrations(namespace, target.etcd_url)
    except ConnectionError as exc:
        raise PreflightError(f"etcd {target.etcd_url} does not answer ({exc})") from None
    if live:
        raise PreflightError(
            f"namespace {namespace!r} has {len(live)} live registrations ({live[0]}...): a "
            "running graph owns it; stop it with `dis-serve down`, not --clean")
    plan = plan_cleanup(namespace, target.etcd_url, target.nats_url)
    if plan.empty:
        console.print(f"nothing of namespace {namespace} on {target.etcd_url}"
                      + (f" or {target.nats_url}" if target.nats_url else ""), markup=False)
        return
    console.print(f"namespace {namespace}: {len(plan.keys)} etcd keys on {plan.etcd_url}, "
                  f"{len(plan.streams)} JetStream streams on {plan.nats_url or '-'}:",
                  markup=False)
    for item in plan.keys + [f"stream {s}" for s in plan.streams]:
        console.print(f"  {item}", markup=False)
    if not yes and not typer.confirm("delete them?", default=False):
        raise typer.Exit(1)
    result = apply_cleanup(plan)
    console.print(f"deleted {result.keys_deleted} keys and {len(result.streams_deleted)} "
                  "streams", markup=False)


COMMANDS = (Command(doctor, ("dis_serve.coordination.doctor_request:DoctorRequest",)),)
