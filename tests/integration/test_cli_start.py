"""`dis-serve --help` stays light: the command table names each command's request models,
which load when that command runs, not when the app starts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")


def test_help_imports_neither_pydantic_nor_any_request_model():
    done = subprocess.run([sys.executable, "-X", "importtime", DIS_SERVE, "--help"],
                          capture_output=True, text=True, check=False, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "pydantic" not in imported
    assert not {name for name in imported
                if name.startswith("dis_serve.") and name.endswith("request")}
