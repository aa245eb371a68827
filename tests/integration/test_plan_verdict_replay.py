"""A verdict the data cannot call says so, on a plan verified in Dynamo's replay, and gives
the `dis-serve compare` run that settles it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from dis_serve.bench.scenario import load_scenario
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.plan.outcome import PlanOutcome
from dis_serve.topology import Mode, Topology

# Llama-3.1-8B, 1000 in / 200 out on eight H100s under a tight SLA: the best disaggregated
# deployment is a few percent ahead of the best aggregated one, while the nearest measured
# disaggregated comparisons (vLLM, a 70B model, 3000 / 150) lie far from it.
CLOSE_CALL = ("plan", "--model", "llama-3.1-8b", "--isl", "1000", "--osl", "200",
              "--budget", "8", "--ttft-ms", "300", "--itl-ms", "20")


@pytest.mark.integration
def test_a_replayed_plan_whose_margin_is_inside_the_error_is_too_close_to_call(
        run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_LEDGER", str(tmp_path / "no-ledger.jsonl"))
    result = run_cli(*CLOSE_CALL, "--out", tmp_path / "plan")
    assert result.exit_code == 0, result.stderr
    outcome = PlanOutcome.model_validate_json((tmp_path / "plan" / "plan.json").read_text())
    plan_replay = next(r for r in outcome.replay if r.deployment == "plan")
    assert plan_replay.steady and plan_replay.passed
    verdict = outcome.verdict
    assert verdict.margin is not None and verdict.model_error is not None
    assert abs(verdict.margin) <= verdict.model_error
    assert verdict.too_close_to_call
    assert "Too close to call from data; measure it" in result.stdout
    assert verdict.compare_command in result.stdout
    words = shlex.split(verdict.compare_command)
    assert words[:2] == ["dis-serve", "compare"]
    agg, disagg = (load_model_file(Topology, Path(words[i])) for i in (2, 3))
    assert (agg.mode, disagg.mode) == (Mode.AGG, Mode.DISAGG)
    assert max(agg.total_gpus, disagg.total_gpus) <= 8
    scenario = load_scenario(Path(words[words.index("--scenario") + 1]))
    assert scenario.request_rate == sorted(
        round(d.requests_per_s, 2)
        for d in (outcome.top_aggregated[0], outcome.top_disaggregated[0]))
