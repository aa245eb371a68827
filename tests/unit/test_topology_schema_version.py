"""The topology file says which format it is written in: files from before the key still load
(`validate` notes it), a file newer than this dis-serve is refused in one line."""

from __future__ import annotations

import yaml

from conftest import GRAPHS, assert_one_line_error
from dis_serve.topology import TOPOLOGY_SCHEMA_VERSION, Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
UNVERSIONED = {key: value for key, value in DEMO.items() if key != "schema_version"}


def test_an_unversioned_file_loads_as_version_1_and_validate_notes_it(run_cli, tmp_path):
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(UNVERSIONED, sort_keys=False))
    result = run_cli("validate", path)
    assert result.exit_code == 0, result.stderr
    assert f"ok {path}: demo" in result.stdout
    assert (f"note: {path}: no schema_version: read as version 1 (add `schema_version: 1`"
            in result.stdout)


def test_a_versioned_file_gets_no_note(run_cli):
    result = run_cli("validate", GRAPHS / "demo.yaml")
    assert result.exit_code == 0, result.stderr
    assert "schema_version" not in result.stdout


def test_a_file_newer_than_this_dis_serve_is_refused_naming_the_versions(run_cli, tmp_path):
    path = tmp_path / "new.yaml"
    path.write_text(yaml.safe_dump({**DEMO, "schema_version": TOPOLOGY_SCHEMA_VERSION + 1}))
    result = run_cli("validate", path)
    assert_one_line_error(result, str(path), "schema_version",
                          f"version {TOPOLOGY_SCHEMA_VERSION + 1} is newer than this "
                          f"dis-serve reads ({TOPOLOGY_SCHEMA_VERSION})", "upgrade dis-serve")


def test_the_version_is_no_setting_a_files_digest_changes_with():
    assert Topology.model_validate(UNVERSIONED).digest == Topology.model_validate(DEMO).digest


def test_every_shipped_graph_says_its_version():
    for path in GRAPHS.glob("*.yaml"):
        assert yaml.safe_load(path.read_text())["schema_version"] == TOPOLOGY_SCHEMA_VERSION, path


def test_the_topologies_plan_writes_say_their_version(run_cli, tmp_path):
    planned = run_cli("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "32",
                      "--rate", "2", "--ttft-ms", "500", "--itl-ms", "50", "--no-replay",
                      "--out", tmp_path)
    assert planned.exit_code == 0, planned.stderr
    for name in ("topology.yaml", "topology-mock.yaml"):
        written = yaml.safe_load((tmp_path / name).read_text())
        assert written["schema_version"] == TOPOLOGY_SCHEMA_VERSION, name
