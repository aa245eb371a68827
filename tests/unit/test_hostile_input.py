"""Input crafted to break out: shell payloads stay text, names cannot leave the run root,
names the filesystem or Dynamo would choke on are refused by `validate` (exit 2, one line)."""

from __future__ import annotations

import copy
import os
import shlex

import pytest
import yaml

from conftest import GRAPHS, assert_one_line_error, topology_variant
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.render.shell_script import render_shell_script
from dis_serve.topology import MAX_SERVED_NAME_BYTES, Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
PAYLOADS = ["$(touch /tmp/pwn)", "`touch /tmp/pwn`", 'x"; touch /tmp/pwn; echo "',
            "x'; touch /tmp/pwn; echo '"]


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _file(tmp_path, **changes) -> str:
    path = tmp_path / "topology.yaml"
    path.write_text(topology_variant(DEMO, **changes))
    return str(path)


def _expansions(line: str) -> list[int]:
    """Offsets of `$(` and backticks that bash would expand: outside single quotes."""
    found, quote, escaped = [], None, False
    for i, char in enumerate(line):
        if escaped:
            escaped = False
        elif quote != "'" and char == "\\":
            escaped = True
        elif char in "'\"" and quote in (None, char):
            quote = None if quote == char else char
        elif quote != "'" and (char == "`" or line.startswith("$(", i)):
            found.append(i)
    return found


def _words(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return []


@pytest.mark.parametrize("payload", PAYLOADS)
def test_launch_script_keeps_a_payload_in_the_served_name_inert(payload):
    data = copy.deepcopy(DEMO)
    data["model"]["served_name"] = payload
    plan = render_launch_plan(Topology.model_validate(data), RenderContext(run_dir="/r"))
    script = render_shell_script(plan, ready_timeout_s=120)
    lines = [line for line in script.splitlines()
             if any(payload in word for word in _words(line))]
    assert lines, "the payload must reach the script for this test to mean anything"
    for line in lines:
        assert _expansions(line) == [], line
    echo = next(line for line in lines if line.startswith("echo "))
    assert shlex.split(echo) == [
        "echo", f"serving {payload} at http://127.0.0.1:8000/v1 (Ctrl-C stops)"]


@pytest.mark.parametrize("host", ["$(touch /tmp/pwn)", "example.com", "x\"; id; echo \""])
def test_a_frontend_host_that_is_not_an_address_is_refused(run_cli, tmp_path, host):
    result = run_cli("validate", _file(tmp_path, frontend__host=host))
    assert_one_line_error(result, "frontend.host", "not an IP address")


def test_a_name_with_a_trailing_newline_is_refused(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, name="demo\n"))
    assert_one_line_error(result, "name", "2-40 lower-case")


def test_a_served_name_longer_than_dynamo_takes_is_refused_with_the_limit(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, model__served_name="m" * 10_000))
    assert_one_line_error(result, "model.served_name", f"at most {MAX_SERVED_NAME_BYTES}")


def test_a_control_character_in_the_model_id_is_refused(run_cli, tmp_path):
    result = run_cli("validate", _file(tmp_path, model__id="tiny\x1b[2J"))
    assert_one_line_error(result, "model.id", "control character")


@pytest.mark.parametrize("command", ["status", "down", "logs"])
def test_a_path_traversing_graph_name_is_refused_and_nothing_outside_is_touched(
        run_cli, home, tmp_path, command):
    planted = tmp_path / "elsewhere"
    planted.mkdir()
    (planted / "state.json").write_text("{}")
    (home / "runs").mkdir(parents=True)
    name = os.path.relpath(planted, home / "runs")
    args = ["logs", "--name", name] if command == "logs" else [command, name]
    result = run_cli(*args)
    assert_one_line_error(result, "is not a graph name")
    assert (planted / "state.json").read_text() == "{}"


def test_a_run_directory_that_is_a_link_out_of_the_run_root_is_refused(run_cli, home, tmp_path):
    outside = RunDir(tmp_path / "outside")
    outside.prepare()
    outside.write_state(GraphStatus(
        name="gr", namespace="dis-serve-gr", run_dir=str(outside.path),
        endpoint="http://127.0.0.1:1", model_name="m", supervisor_pid=1,
        supervisor_create_time=1.0, phase=GraphPhase.READY, started_at=0.0, processes=[]))
    (home / "runs").mkdir(parents=True)
    (home / "runs" / "gr").symlink_to(outside.path)
    assert_one_line_error(run_cli("down", "gr"), "is a symbolic link")
    assert outside.read_state().phase is GraphPhase.READY
