"""The `dis-serve` entry point: one Typer app, one place where errors become one line.

Nothing heavy is imported at module level: the console script imports this module before
`main` can catch anything, so a Ctrl-C during Typer's and Rich's imports would otherwise end
in a KeyboardInterrupt traceback instead of one line and exit code 130.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .options import help_paragraphs

__all__ = ["build_app", "help_paragraphs", "main"]

EXIT_INTERRUPTED = 130
PRIVATE_UMASK = 0o077


def command_groups() -> tuple:
    """The command modules, in the order `--help` lists their commands."""
    from . import (
        agent_cmds,
        bench_cmds,
        change_cmds,
        chaos_cmds,
        doctor_cmds,
        launch_cmds,
        observe_cmds,
        plan_cmds,
        topology_cmds,
    )

    return (topology_cmds, launch_cmds, change_cmds, agent_cmds, doctor_cmds, bench_cmds,
            chaos_cmds, plan_cmds, observe_cmds)


def command_table() -> list:  # -> list[inputs.options.Command]
    """Every command, as `--help` lists them (STYLE 24: one table; options from models)."""
    return [command for group in command_groups() for command in group.COMMANDS]


def build_app():  # -> typer.Typer
    import typer

    from .options import add_command

    app = typer.Typer(
        name="dis-serve",
        help="Disaggregated LLM serving on NVIDIA Dynamo: validate, render, up, scale, apply, "
             "doctor, bench, chaos, plan, diff, top.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    @app.callback()
    def _root(debug: bool = typer.Option(False, "--debug",
                                         help="Show tracebacks on errors.")) -> None:
        """`--debug` is read from argv by `main`, before any command runs."""
        # Everything a command writes (run directories, bench and chaos output, rendered
        # files, what AIPerf and the graph's processes write) is its user's alone: logs hold
        # prompts, state holds pids. One umask here instead of a mode at every open.
        os.umask(PRIVATE_UMASK)

    for command in command_table():
        add_command(app, command)
    for command in app.registered_commands:
        if command.help is None and command.callback is not None:
            command.help = help_paragraphs(command.callback.__doc__ or "")
    return app


def usage_line(exc: Exception) -> str:
    """A click error as one line: the command, what is wrong, where the options are listed."""
    message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return message
    return f"{ctx.command_path}: {message} (fix: `{ctx.command_path} --help` lists its options)"


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
    # The interpreter's last collection at exit walks every object the imports made
    # (pydantic's schemas above all): ~0.1 s of every command here, for memory the OS takes
    # back anyway. Frozen objects are skipped; atexit handlers still run.
    gc.freeze()
    sys.exit(code)


@contextmanager
def _long_lived_heap() -> Iterator[None]:
    """Typer's, Rich's and pydantic's imports allocate tens of thousands of objects that live
    until exit; collecting among them while they load cost 30-60 ms of each start here. So no
    collection during the imports, and afterwards they sit in the permanent generation, which
    later collections (and the copy-on-write pages of `up --detach`'s forked supervisor) leave
    alone (the pattern `gc.freeze`'s documentation gives)."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def _run(debug: bool) -> int:
    """The command's exit status; errors are printed here, once."""
    from ..errors import DisServeError, no_space

    try:
        with _long_lived_heap():
            app = build_app()
        code = app(prog_name="dis-serve", standalone_mode=False)
    except DisServeError as exc:
        if debug:
            raise
        from rich.markup import escape

        _err_console().print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False)
        return exc.exit_code
    except OSError as exc:
        if debug or not no_space(exc):
            raise
        # A full disk can stop any command at any write: one line naming where, not a
        # traceback (what it left says so itself: `status` reads what was recorded).
        from rich.markup import escape

        where = f" writing {exc.filename}" if exc.filename else ""
        line = f"no space left on the device{where} ({exc.strerror}); free space there and " \
               "run it again"
        _err_console().print(f"[bold red]error:[/] {escape(line)}", highlight=False)
        return 1
    except Exception as exc:
        # Usage errors (an unknown option, a missing argument) come from click or from the
        # copy of click Typer 0.29 vendors; both know their message and exit code. Shown as
        # one line like every other bad input, not as click's usage block.
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(exit_code, int):
            if type(exc).__name__ == "Abort":
                return EXIT_INTERRUPTED
            from rich.markup import escape

            _err_console().print(f"[bold red]error:[/] {escape(usage_line(exc))}")
            return exit_code
        raise
    # Without standalone mode Typer returns the code of a `typer.Exit` (130 for a Ctrl-C)
    # and the command's own return value (None) otherwise.
    return code if isinstance(code, int) else 0
