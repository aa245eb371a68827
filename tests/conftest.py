"""Shared fixtures: run the CLI in-process exactly as a user would from a shell."""

from __future__ import annotations

import sys
import time
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


def on_ports(data: dict, name: str, base: int) -> dict:
    """A topology mapping renamed and moved onto ports base..base+10+workers, so tests (and
    several test files at once) never meet each other or a graph a person left running."""
    data = dict(data, name=name)
    data["frontend"] = dict(data.get("frontend") or {}, port=base)
    data["coordination"] = {"etcd": {"client_port": base + 1, "peer_port": base + 2},
                            "nats": {"port": base + 3}}
    data["observability"] = {"system_port_base": base + 10}
    return data


def wait_until(predicate, timeout: float = 20.0) -> bool:
    """Poll `predicate` until it holds or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
