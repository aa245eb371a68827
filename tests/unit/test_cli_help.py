"""`--help` reads as wrapped prose at any width: no sentence broken where its source line ended."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from dis_serve.cli.app import build_app, help_paragraphs

WIDTH = 100
# Command name (Typer's: the function's, "_" as "-") -> its function.
CALLBACKS = {command.name or command.callback.__name__.replace("_", "-"): command.callback
             for command in build_app().registered_commands}
COMMANDS = list(CALLBACKS)
# Typer's own additions to an option's help start a line of their own on purpose.
TYPER_NOTE = re.compile(r"\[(default|required|env var)")
CELL_GAP = re.compile(r" {2,}")
CELL = re.compile(r"\S+(?: \S+)*")  # table cells are at least two spaces apart


def help_text(run_cli, monkeypatch, *args: str) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    result = run_cli(*args, "--help")
    assert result.exit_code == 0, result.stderr
    return result.stdout


def prose_columns(text: str) -> list[list[tuple[int, str]]]:
    """Runs of wrapped lines as (column, text): the description under `Usage:` and, in each
    panel, the last cell of each row with its continuation lines. Rows start a new run."""
    runs: list[list[tuple[int, str]]] = []
    for line in text.splitlines():
        body = line.replace("│", " ").rstrip()
        if not body.strip() or line.lstrip()[:1] in "╭╰" or "Usage:" in line:
            runs.append([])
            continue
        cells = list(CELL.finditer(body))
        last = cells[-1]
        continues = len(cells) == 1 and runs and runs[-1] and runs[-1][-1][0] == last.start()
        if not continues:
            runs.append([])
        runs[-1].append((last.start(), last.group()))
    return [run for run in runs if run]


def premature_breaks(text: str) -> list[str]:
    """Lines that end although the next line's first word would have fitted: a greedy wrap
    (Rich's) never does that, a hard line break in the help source does. A column's width is
    taken as its longest line, which is at most its real width, so every finding is real."""
    found = []
    for run in prose_columns(text):
        width = max(column + len(words) for column, words in run)
        for (column, words), (_, following) in pairwise(run):
            if TYPER_NOTE.match(following):
                continue
            if column + len(words) + 1 + len(following.split()[0]) <= width:
                found.append(f"{words!r} then {following!r}")
    return found


def test_the_command_list_wraps_each_summary_as_one_paragraph(run_cli, monkeypatch):
    assert premature_breaks(help_text(run_cli, monkeypatch)) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_commands_help_wraps_its_description_and_options_as_prose(run_cli, monkeypatch,
                                                                    command):
    assert premature_breaks(help_text(run_cli, monkeypatch, command)) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_commands_help_shows_every_paragraph_of_its_docstring(run_cli, monkeypatch,
                                                               command):
    callback = CALLBACKS[command]
    shown = " ".join(CELL_GAP.sub(" ", help_text(run_cli, monkeypatch, command)).split())
    for paragraph in help_paragraphs(callback.__doc__).split("\n\n"):
        assert paragraph in shown


def test_help_paragraphs_undo_source_line_breaks_but_keep_paragraphs():
    doc = """First line
    goes on.

    Second
    paragraph."""
    assert help_paragraphs(doc) == "First line goes on.\n\nSecond paragraph."


def test_the_finder_reports_a_hard_line_break():
    broken = ("│ status     Show a running graph's processes (pid, state, port, restarts,   │\n"
              "│            registrations, ready), and its worker                           │\n"
              "│            (or starting, or was stopped cleanly), 3 when degraded, 1 when   │\n")
    assert premature_breaks(broken) == [
        "'registrations, ready), and its worker' then '(or starting, or was stopped "
        "cleanly), 3 when degraded, 1 when'"]
