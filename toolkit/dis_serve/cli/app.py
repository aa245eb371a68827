"""The `dis-serve` entry point: one Typer app, one place where errors become one line."""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import DisServeError
from . import bench_cmds, doctor_cmds, launch_cmds, plan_cmds, topology_cmds

app = typer.Typer(
    name="dis-serve",
    help="Disaggregated LLM serving on NVIDIA Dynamo: validate, render, up, bench, plan.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors.")) -> None:
    """Declared so Typer accepts and documents --debug; `main` reads it before Typer runs,
    because errors are shown (or raised) outside the app."""


for _group in (topology_cmds, launch_cmds, doctor_cmds, bench_cmds, plan_cmds):
    _group.register(app)


def main() -> None:
    debug = "--debug" in sys.argv[1:]
    try:
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            # Outside standalone mode click returns typer.Exit's code instead of exiting.
            sys.exit(code)
    except DisServeError as exc:
        if debug:
            raise
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("aborted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:
        # Usage errors (a bad option value) come from click or from the copy of click Typer
        # 0.29 vendors; both know how to show themselves and which exit code they mean.
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(exit_code, int):
            exc.show()
            sys.exit(exit_code)
        raise
