"""The entry point's own start-up: garbage collection is off only while the CLI imports."""

from __future__ import annotations

import gc

import pytest

from dis_serve.cli import topology_cmds


@pytest.fixture(autouse=True)
def _restore_gc():
    yield
    gc.enable()
    gc.unfreeze()


def test_a_command_runs_with_garbage_collection_on(run_cli, monkeypatch):
    seen = []

    def schema(_request) -> None:
        """Stand-in for `schema` that records the collector's state."""
        seen.append(gc.isenabled())

    monkeypatch.setattr(topology_cmds, "schema", schema)
    assert run_cli("schema").exit_code == 0
    assert seen == [True]


def test_a_usage_error_leaves_garbage_collection_on(run_cli):
    assert run_cli("validate", "--no-such-option").exit_code == 2
    assert gc.isenabled()
