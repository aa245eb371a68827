"""`diff` (what differs between two runs) and `top` (a live per-pool view of a running graph)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console

from ..inputs.options import Command

if TYPE_CHECKING:
    from ..bench.request import DiffRequest
    from ..observe.request import TopRequest

console = Console(highlight=False, soft_wrap=True)


def _value(value: object) -> str:
    return "(absent)" if value is None else str(value)


def diff(request: DiffRequest) -> None:
    """Say what differs between two runs (configuration, versions, hardware, environment) and
    put their results side by side with the change."""
    from rich.table import Table

    from ..bench.run_diff import Category, diff_fingerprints, diff_results, load_run

    run_a, run_b = request.run_a, request.run_b

    a, b = load_run(run_a), load_run(run_b)
    console.print(f"A: {run_a} ({a.command}, {a.created_at})", markup=False)
    console.print(f"B: {run_b} ({b.command}, {b.created_at})", markup=False)
    differences = diff_fingerprints(a, b)
    for category in Category:
        found = [d for d in differences if d.category is category]
        console.print(f"{category.value}: " + (f"{len(found)} differ" if found else "same"),
                      markup=False)
        for d in found:
            console.print(f"  {d.key}: {_value(d.a)} -> {_value(d.b)}", markup=False)
    rows = diff_results(run_a, run_b)
    if not rows:
        return
    table = Table(title="results", title_justify="left")
    for column in ("load", "metric", "A", "B", "change"):
        table.add_column(column, justify="right" if column in ("A", "B", "change") else "left")
    for row in rows:
        change = row.change_pct
        table.add_row(row.load, f"{row.metric} ({row.unit})",
                      "n/a" if row.a is None else f"{row.a:.4g}",
                      "n/a" if row.b is None else f"{row.b:.4g}",
                      "n/a" if change is None else f"{change:+.1f}%")
    console.print(table)


def _num(value: float | None, digits: int = 1, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.{digits}f}{suffix}"


def _frontend_line(frame) -> str:
    f = frame.frontend
    if f is None:
        return "frontend: not answering"
    stages = ", ".join(f"{k} {v:g}" for k, v in f.stages.items() if v) or "none"
    return (f"frontend: {f.requests_per_s:.2f} req/s ({f.requests:g} in the window, "
            f"{f.errors:g} failed), {_num(f.output_tokens_per_s)} output tok/s, active "
            f"{_num(f.active, 0)}; TTFT p50/p99 {_num(f.ttft_p50_ms)}/{_num(f.ttft_p99_ms)} ms, "
            f"ITL p50/p99 {_num(f.itl_p50_ms, 2)}/{_num(f.itl_p99_ms, 2)} ms; prompt tokens "
            f"cached {_num(f.cached_prompt_pct, 1, '%')}; in stages: "
            f"{stages}")


def _pool_cells(p) -> list[str]:
    ready = "?" if p.workers_ready is None else str(p.workers_ready)
    kv = "-" if p.kv_cache_pct is None else (
        f"{p.kv_cache_pct:.1f}%" + (" (router)" if p.kv_cache_from == "router" else ""))
    transfer = "-" if p.kv_transfer_ms is None else (
        f"{p.kv_transfer_ms:.1f} ms" + (f", {p.kv_transfer_gb_s:.2f} GB/s"
                                        if p.kv_transfer_gb_s is not None else "")
        + (" (est.)" if p.kv_transfer_from == "router estimate" else ""))
    return [p.pool.value, f"{ready}/{p.workers_total}", _num(p.restarts, 0),
            _num(p.requests_per_s, 2), _num(p.queue, 0), _num(p.active, 0), kv, transfer,
            _num(p.prefix_hit_pct, 1, "%")]


# How a process's state reads in its row; anything else (gone, not answering) stands out.
_STATE_STYLE = {"ready": None, "answering": None, "not started": "dim", "not ready": "yellow"}


def _process_table(frame):
    """One row per process with the node it runs on, as `status` lists them."""
    from rich import box
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("process", "node", "state", "req/s", "active", "queue", "KV cache"):
        table.add_column(column, justify="left" if column in ("process", "node", "state")
                         else "right", no_wrap=True)
    for p in frame.processes:
        table.add_row(p.name, p.node or "-", p.state, _num(p.requests_per_s, 2),
                      _num(p.active, 0), _num(p.queue, 0), _num(p.kv_cache_pct, 1, "%"),
                      style=_STATE_STYLE.get(p.state, "bold red"))
    return table


def render_frame(frame):
    """The frame as Rich renderables: the pools, (on several nodes) every process with its
    node, the frontend's line, the verdict, what did not answer."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title_justify="left",
                  title=f"{frame.graph}: last {frame.window_s:.1f} s")
    for column in ("pool", "ready", "restarts", "req/s", "queue", "active", "KV cache",
                   "KV transfer", "prefix hits"):
        table.add_column(column, justify="left" if column == "pool" else "right",
                         no_wrap=True)
    for pool in frame.pools:
        table.add_row(*_pool_cells(pool),
                      style="bold red" if pool.pool is frame.bottleneck else None)
    parts = [table]
    if any(p.node for p in frame.processes):
        parts.append(_process_table(frame))
    parts += [Text(_frontend_line(frame)), Text(frame.verdict, style="bold")]
    if frame.change:
        parts.append(Text(frame.change, style="cyan"))
    parts += [Text(problem, style="bold red") for problem in frame.node_problems]
    if frame.unreachable:
        parts.append(Text("not answering: " + ", ".join(frame.unreachable), style="yellow"))
    return Group(*parts)


def _layout(name: str | None, url: str | None, client):
    from ..errors import RunError
    from ..observe.scrape import fetch, layout_from_url
    from ..placements.lookup import layout_from_run

    if url is None:
        return layout_from_run(name)
    page = fetch(client, f"{url.rstrip('/')}/metrics")
    if page is None:
        raise RunError(f"{url}/metrics does not answer; is the graph's frontend there?")
    return layout_from_url(url, page)


def top(request: TopRequest) -> None:
    """A live view per pool of a running graph: workers, requests/s, TTFT and ITL, queues,
    KV cache and transfers, prefix hits, and which pool is the bottleneck."""
    from ..security.http_client import direct_client

    if not console.is_terminal:  # logs and pipes: wide enough for the pool table
        console.width = max(console.width, 120)
    name, url = request.name, request.url
    # A graph of ours is scraped with its frontend's CA (and client certificate).
    tls = _layout(name, None, None).frontend_tls if url is None else None
    with direct_client(timeout_s=2.0, tls=tls) as client:
        layout = _layout(name, url, client)
        if request.once:
            _once(layout, client, request.window, request.as_json)
        else:
            _live(layout, client, request.window, from_run=url is None)


def _once(layout, client, window: float, json_out: bool) -> None:
    import sys
    import time

    from ..observe.frame import build_frame
    from ..observe.scrape import scrape

    before = scrape(client, layout.urls)
    # Said once the first scrape is in: a script may now send the load it wants measured.
    print(f"measuring {layout.name} for {window:g} s", file=sys.stderr, flush=True)
    time.sleep(max(0.0, window - (time.monotonic() - before.at_s)))
    frame = build_frame(layout, before, scrape(client, layout.urls))
    if json_out:
        console.print_json(frame.model_dump_json())
    else:
        console.print(render_frame(frame))


def _live(layout, client, window: float, from_run: bool) -> None:
    import time
    from collections import deque

    from rich.live import Live

    from ..observe.frame import build_frame
    from ..observe.scrape import scrape
    from ..placements.lookup import layout_from_run

    history = deque([scrape(client, layout.urls)])
    with Live(console=console, auto_refresh=False, transient=False) as live:
        while True:
            time.sleep(REFRESH_S)
            if from_run:
                layout = layout_from_run(layout.name)  # readiness and restarts move
            history.append(scrape(client, layout.urls))
            while len(history) > 2 and history[-1].at_s - history[1].at_s >= window:
                history.popleft()
            live.update(render_frame(build_frame(layout, history[0], history[-1])),
                        refresh=True)


REFRESH_S = 1.0


COMMANDS = (Command(diff, ("dis_serve.bench.request:DiffRequest",)),
            Command(top, ("dis_serve.observe.request:TopRequest",)))
