"""`plan --calibrate` on measurements: a mocker graph whose timing differs from the planner's
model by known factors is benchmarked with real AIPerf, and the factors fitted from one load
point correct the prediction of another."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from dis_serve.plan.calibration import fit_calibration, predict_measured, read_measurements
from dis_serve.plan.emit import plan_topology, topology_yaml
from dis_serve.plan.mocker_profile import profile_tables, write_profile
from dis_serve.plan.model_choice import choose_perf_model
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.request import build_request
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
# What the "hardware" (the mocker's timing tables) really does against the planner's model.
PREFILL_TRUTH = 1.5
DECODE_TRUTH = 1.3
# Plan-test ports are 31600-31699 here: Dynamo reads DYN_SYSTEM_PORT as a signed 16-bit
# number, so the workers' system ports (base + 10 ...) must stay below 32768.
PORT_BASE = 31600
ISL, OSL = 3000, 48
REQUEST = {"model": "llama-3.1-8b", "isl": ISL, "osl": OSL, "budget": 4, "ttft_ms": 3000.0,
           "itl_ms": 60.0, "replay": False}


def _cli(*args, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False, env=os.environ | {"COLUMNS": "140"})


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory) -> Path:
    """`bench` on a planned disaggregated mocker graph timed PREFILL_TRUTH / DECODE_TRUTH
    slower than the plan's own tables, at one and at three requests in flight."""
    folder = tmp_path_factory.mktemp("calibration")
    request = build_request(**REQUEST)
    result = make_plan(request)
    plan = result.best_disagg
    tables = profile_tables(result.model, plan, ISL, result.space.seq_len)
    truth = write_profile(type(tables)(
        tables.prefill_isl, [t * PREFILL_TRUTH for t in tables.prefill_ttft_ms],
        tables.decode_active_kv_tokens, tables.decode_context_length,
        (np.array(tables.decode_itl) * DECODE_TRUTH).tolist()), folder / "truth.npz")
    topo = plan_topology(plan, request, result.workload, mock=True, profile=truth)
    data = relocate(yaml.safe_load(topology_yaml(topo, "calibration test")), "calib", PORT_BASE)
    # Both load points send the same seeded prompts: with prefix caching the second would
    # find them cached, and every prefill must be timed.
    data["mocker"]["prefix_caching"] = False
    topo_file = folder / "calib.yaml"
    topo_file.write_text(yaml.safe_dump(data, sort_keys=False))
    scenario = folder / "steady.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "steady", "input_tokens": {"mean": ISL, "stddev": 0},
        "output_tokens": {"mean": OSL, "stddev": 0}, "requests": 8, "warmup_requests": 1,
        "concurrency": [1, 3], "sla": {"ttft_ms": 5000, "itl_ms": 200}}))
    out = folder / "bench"
    done = _cli("bench", topo_file, "--scenario", scenario, "--out", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_factors_fitted_at_one_load_correct_the_prediction_at_another(measured_run):
    low, high = sorted(read_measurements([measured_run]), key=lambda m: m.rate_per_s)
    request = build_request(**REQUEST)
    model = choose_perf_model(request.target())
    calibration = fit_calibration(model, [low], request.gpus_per_node)
    assert calibration.decode == pytest.approx(DECODE_TRUTH, rel=0.15)
    # What the frontend and the hand-off add to TTFT on a real graph lands on prefill too.
    assert calibration.prefill >= 0.9 * PREFILL_TRUTH
    before = predict_measured(model, high, request.gpus_per_node)
    model.calibrate(calibration.prefill, calibration.decode)
    after = predict_measured(model, high, request.gpus_per_node)
    # The truth is 30-50% off the plan's tables; what the 2-core machine's other load adds to a
    # measured TTFT (10-16% seen under a parallel test run) must not pass for the fit's error:
    # the calibrated prediction is judged against the uncalibrated one, and loosely alone.
    for measured, uncalibrated, calibrated in ((high.ttft_ms, before.ttft_mean_ms,
                                                after.ttft_mean_ms),
                                               (high.itl_ms, before.itl_ms, after.itl_ms)):
        error_before, error_after = abs(uncalibrated / measured - 1), abs(calibrated / measured - 1)
        assert error_before > 0.15
        assert error_after < error_before / 2
        assert calibrated == pytest.approx(measured, rel=0.20)


def test_plan_calibrate_shows_saves_and_plans_with_the_factors(measured_run, tmp_path):
    args = [f"--{k.replace('_', '-')}={v}" for k, v in REQUEST.items() if k != "replay"]
    done = _cli("plan", *args, "--no-replay", "--calibrate", measured_run, "--out", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "calibrated from 2 measured point(s): prefill x" in done.stdout
    saved = (tmp_path / "calibration.json").read_text()
    assert '"decode"' in saved and '"prefill"' in saved
