"""The `dis-serve` entry point: one Typer app, one place where errors become one line.

Nothing heavy is imported at module level: the console script imports this module before
`main` can catch anything, so a Ctrl-C during Typer's and Rich's imports would otherwise end
in a KeyboardInterrupt traceback instead of one line and exit code 130.
"""

from __future__ import annotations

import sys

EXIT_INTERRUPTED = 130


def build_app():  # -> typer.Typer
    import typer

    from . import (
        agent_cmds,
        bench_cmds,
        chaos_cmds,
        doctor_cmds,
        launch_cmds,
        plan_cmds,
        topology_cmds,
    )

    app = typer.Typer(
        name="dis-serve",
        help="Disaggregated LLM serving on NVIDIA Dynamo: validate, render, up, doctor, bench, "
             "chaos, plan.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(debug: bool = typer.Option(False, "--debug",
                                         help="Show tracebacks on errors.")) -> None:
        """`--debug` is read from argv by `main`, before any command runs."""

    for group in (topology_cmds, launch_cmds, agent_cmds, doctor_cmds, bench_cmds, chaos_cmds,
                  plan_cmds):
        group.register(app)
    return app


def _err_console():
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def main() -> None:
    debug = "--debug" in sys.argv[1:]
    try:
        code = _run(debug)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    if code == EXIT_INTERRUPTED:
        # Typer turns a Ctrl-C inside a command into exit code 130; say so in one line.
        print("interrupted", file=sys.stderr)
    sys.exit(code)


def _run(debug: bool) -> int:
    """The command's exit status; errors are printed here, once."""
    from ..errors import DisServeError

    try:
        code = build_app()(standalone_mode=False)
    except DisServeError as exc:
        if debug:
            raise
        from rich.markup import escape

        _err_console().print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_code
    except Exception as exc:
        # Usage errors (a bad option value) come from click or from the copy of click Typer
        # 0.29 vendors; both know how to show themselves and which exit code they mean.
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(exit_code, int):
            if type(exc).__name__ == "Abort":
                return EXIT_INTERRUPTED
            exc.show()
            return exit_code
        raise
    # Without standalone mode Typer returns the code of a `typer.Exit` (130 for a Ctrl-C)
    # and the command's own return value (None) otherwise.
    return code if isinstance(code, int) else 0
