"""`dis-serve plan` as a user runs it."""

from __future__ import annotations

import json

import pytest

PLAN = ("plan", "--model", "llama-3.1-70b", "--isl", "3000", "--osl", "500",
        "--ttft-ms", "1000", "--itl-ms", "50")


def test_plan_prints_both_tables_and_writes_plan_files(run_cli, tmp_path):
    result = run_cli(*PLAN, "--budget", "48", "--no-replay", "--out", tmp_path,
                     "--emit", tmp_path / "mine.yaml", "--mock")
    assert result.exit_code == 0, result.stderr
    assert "Top disaggregated" in result.stdout and "Top aggregated" in result.stdout
    for name in ("topology.yaml", "topology-mock.yaml", "mocker-profile.npz", "pareto.png"):
        assert (tmp_path / name).stat().st_size > 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["performance_model"]["source"] == "aiconfigurator"
    assert plan["plan"]["gpus"] <= 48
    assert "backend: mocker" in (tmp_path / "mine.yaml").read_text()
    assert f"dis-serve up {tmp_path / 'mine.yaml'}" in result.stdout


def test_the_emitted_topology_passes_validate(run_cli, tmp_path):
    assert run_cli(*PLAN, "--rate", "8", "--no-replay", "--out", tmp_path).exit_code == 0
    result = run_cli("validate", tmp_path / "topology.yaml", tmp_path / "topology-mock.yaml")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("ok ") == 2


@pytest.mark.parametrize(("args", "says"), [
    (("--model", "gpt-5"), "unknown model 'gpt-5'"),
    (("--budget", "48", "--rate", "3"), "either --rate or --budget"),
    ((), "give --rate"),
    (("--budget", "48", "--compare-split", "8-40"), "PREFILL:DECODE"),
    (("--budget", "48", "--gpu", "tpu"), "unknown GPU 'tpu'"),
])
def test_bad_input_is_one_line_and_exit_2(run_cli, tmp_path, args, says):
    result = run_cli(*PLAN, *args, "--no-replay", "--out", tmp_path)
    assert result.exit_code == 2
    assert says in result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert "Traceback" not in result.stderr


def test_plan_json_reads_back_as_the_outcome_the_command_printed(run_cli, tmp_path):
    from dis_serve.plan.outcome import PlanOutcome

    result = run_cli(*PLAN, "--budget", "48", "--no-replay", "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    outcome = PlanOutcome.model_validate_json((tmp_path / "plan.json").read_text())
    assert f"{outcome.plan.gpus} GPUs, {outcome.plan.requests_per_s:.2f} req/s" in result.stdout
    assert outcome.verdict in result.stdout
