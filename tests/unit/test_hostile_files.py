"""Files and numbers that would hang, flood or crash a command are refused in one line (exit
2) before anything runs: FILE arguments that are not regular files, traces that are not
traces (or are far too big), SLAs that are not finite; `validate` warns what `up` warns."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from conftest import GRAPHS, REPO, assert_one_line_error, topology_variant
from dis_serve.bench.runner import check_trace_fits_model
from dis_serve.bench.scenario import load_scenario
from dis_serve.errors import UserInputError
from dis_serve.inputs import mooncake_trace
from dis_serve.inputs.mooncake_trace import check_trace
from dis_serve.topology import Topology

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
SAMPLE_TRACE = REPO / "benchmarks" / "traces" / "sample-mooncake.jsonl"


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def _special(kind: str, tmp_path: Path, fifo: Path) -> tuple[Path, str]:
    return {"directory": (tmp_path, "is a directory"),
            "fifo": (fifo, "is a named pipe (FIFO)"),
            "device": (Path("/dev/zero"), "is a character device")}[kind]


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_topology_file_that_is_not_a_regular_file_says_what_it_is(run_cli, tmp_path, fifo,
                                                                      kind):
    path, says = _special(kind, tmp_path, fifo)
    result = run_cli("validate", str(path))
    assert_one_line_error(result, str(path), says, "not a regular file")


def test_a_missing_topology_file_still_says_not_found(run_cli, tmp_path):
    assert_one_line_error(run_cli("validate", str(tmp_path / "none.yaml")), "file not found")


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_scenario_file_that_is_not_a_regular_file_says_what_it_is(tmp_path, fifo, kind):
    path, says = _special(kind, tmp_path, fifo)
    with pytest.raises(UserInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        load_scenario(path)


def _scenario(tmp_path: Path, trace: Path) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"name": "tr", "trace": {"file": str(trace)},
                                    "sla": {"ttft_ms": 100, "itl_ms": 10}}))
    return path


def _trace(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_a_file_that_is_not_a_trace_is_refused_without_showing_its_lines(tmp_path):
    secret = _trace(tmp_path, "root:$y$j9T$secret-hash:19000:0:99999:7:::")
    with pytest.raises(UserInputError) as info:
        load_scenario(_scenario(tmp_path, secret))
    message = str(info.value)
    assert "line 1: not JSON" in message and "trace.file" in message
    assert "secret-hash" not in message and "root:" not in message


@pytest.mark.parametrize("kind", ["directory", "fifo", "device"])
def test_a_trace_that_is_not_a_regular_file_is_refused_naming_the_key(tmp_path, fifo, kind):
    path, says = _special(kind, tmp_path, fifo)
    with pytest.raises(UserInputError, match=r"trace\.file") as info:
        load_scenario(_scenario(tmp_path, path))
    assert says in str(info.value)


@pytest.mark.parametrize(("line", "says"), [
    ('{"input_length": 100000000, "output_length": 8}', "input_length = 100000000"),
    ('{"input_length": 0, "output_length": 8}', "input_length = 0"),
    ('{"input_length": 10, "output_length": -1}', "output_length = -1"),
    ('{"input_length": "10", "output_length": 8}', "input_length"),
    ('{"input_length": 10, "timestamp": -5}', "timestamp = -5"),
    ('{"output_length": 8}', "input_length is missing"),
    ('{"input_length": 10, "prompt": "hi"}', "prompt is not a trace field"),
    ('[1, 2]', "not a JSON object"),
])
def test_a_bad_trace_line_is_one_error_naming_the_line_and_key(tmp_path, line, says):
    trace = _trace(tmp_path, '{"input_length": 10, "output_length": 8}', line)
    with pytest.raises(UserInputError) as info:
        check_trace(trace)
    message = str(info.value)
    assert f"{trace} line 2: " in message and says in message, message
    assert "\n" not in message


def test_an_empty_trace_is_refused(tmp_path):
    with pytest.raises(UserInputError, match="has no requests"):
        check_trace(_trace(tmp_path, "", "  "))


def test_a_trace_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(mooncake_trace, "MAX_TRACE_BYTES", 64)
    trace = _trace(tmp_path, *['{"input_length": 10, "output_length": 8}'] * 4)
    with pytest.raises(UserInputError, match="over the limit of 64"):
        check_trace(trace)


def test_the_shipped_trace_passes():
    rows = check_trace(SAMPLE_TRACE)
    assert len(rows) == len(SAMPLE_TRACE.read_text().splitlines())


def test_a_trace_request_longer_than_the_model_takes_is_refused_before_aiperf(tmp_path):
    topo = Topology.model_validate(DEMO)
    too_long = topo.model.max_input_tokens + 1
    trace = _trace(tmp_path, json.dumps({"input_length": 10, "output_length": 8}),
                   json.dumps({"input_length": too_long, "output_length": 8}))
    scenario = load_scenario(_scenario(tmp_path, trace))
    with pytest.raises(UserInputError, match=f"request 2 has input_length {too_long}"):
        check_trace_fits_model(topo, scenario)


@pytest.mark.parametrize("flag", ["--ttft-ms", "--itl-ms", "--rate"])
@pytest.mark.parametrize("value", ["inf", "nan", "1e309", "-inf"])
def test_plan_numbers_must_be_finite(run_cli, tmp_path, flag, value):
    args = {"--ttft-ms": "300", "--itl-ms": "20", "--rate": "2"} | {flag: value}
    result = run_cli("plan", "--model", "llama-3.1-8b", "--isl", "1000", "--osl", "100",
                     "--no-replay", "--out", str(tmp_path), *[x for kv in args.items()
                                                              for x in kv])
    assert_one_line_error(result, flag, "finite")


def test_a_plan_trace_that_is_a_fifo_is_refused(run_cli, tmp_path, fifo):
    result = run_cli("plan", "--model", "llama-3.1-8b", "--trace", str(fifo), "--ttft-ms",
                     "300", "--itl-ms", "20", "--no-replay", "--out", str(tmp_path))
    assert_one_line_error(result, "--trace", "named pipe")


def test_validate_warns_about_a_frontend_on_every_interface_like_up(run_cli, tmp_path):
    path = tmp_path / "open.yaml"
    path.write_text(topology_variant(DEMO, frontend__host="0.0.0.0"))
    result = run_cli("validate", str(path))
    assert result.exit_code == 0, result
    assert "warning: frontend.host is 0.0.0.0" in result.stdout


def test_validate_of_a_loopback_graph_warns_about_nothing(run_cli):
    result = run_cli("validate", str(GRAPHS / "demo.yaml"))
    assert result.exit_code == 0 and "warning" not in result.stdout
