"""Shared fixtures: run the CLI in-process exactly as a user would from a shell."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GRAPHS = REPO / "graphs"


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Call `dis-serve ARGS...` through the real entry point (error handling included)."""
    from dis_serve.cli.app import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["dis-serve", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run
