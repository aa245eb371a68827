"""What a plan writes: topologies `validate` accepts, the mocker's timing tables, and a
replay that agrees with the prediction."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import assert_one_line_error
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.plan.emit import plan_topology, write_topology
from dis_serve.plan.mocker_profile import profile_tables, write_profile
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.replay import kv_blocks, replay_plan
from dis_serve.plan.request import build_request
from dis_serve.render.planner_config import planner_config
from dis_serve.topology import Backend, Mode, PoolRole, Topology, WeightDtype


@pytest.fixture(scope="module")
def planned():
    request = build_request(model="llama-3.1-70b", isl=3000, osl=500, budget=48,
                            ttft_ms=1000.0, itl_ms=50.0)
    return make_plan(request)


@pytest.fixture(scope="module")
def profile(planned, tmp_path_factory):
    tables = profile_tables(planned.model, planned.chosen, planned.workload.isl,
                            planned.space.seq_len)
    return write_profile(tables, tmp_path_factory.mktemp("plan") / "mocker-profile.npz")


def test_the_trtllm_topology_validates_through_the_same_loader_as_validate(planned, tmp_path):
    topo = plan_topology(planned.chosen, planned.request, planned.workload)
    path = write_topology(topo, tmp_path / "plan.yaml", "planned")
    loaded = load_model_file(Topology, path)
    assert loaded.backend is Backend.TRTLLM
    assert loaded.total_gpus == planned.chosen.gpus
    for pool in planned.chosen.pools:
        written = loaded.pools.get(pool.role)
        assert (written.workers, written.tensor_parallel, written.max_batch_size) == (
            pool.workers, pool.tp, pool.max_batch)


def test_the_planned_topology_carries_the_rate_its_frontend_is_sized_for(planned):
    topo = plan_topology(planned.chosen, planned.request, planned.workload)
    assert topo.frontend.planned_rate_per_s == round(planned.chosen.rate, 2)


def test_the_mock_topology_times_the_mocker_with_the_plans_profile(planned, profile, tmp_path):
    topo = plan_topology(planned.chosen, planned.request, planned.workload, mock=True,
                         profile=profile)
    loaded = load_model_file(Topology, write_topology(topo, tmp_path / "mock.yaml", "m"))
    assert loaded.backend is Backend.MOCKER
    assert loaded.mocker.profile_data == str(profile.resolve())
    binding = PoolRole.DECODE if planned.chosen.mode is Mode.DISAGG else PoolRole.AGG
    assert loaded.mocker.num_gpu_blocks == kv_blocks(planned.model.target,
                                                     planned.chosen.pool(binding))


def test_the_profile_is_in_the_format_the_mocker_loads(profile):
    from dynamo.mocker.utils.planner_profiler_perf_data_converter import is_mocker_format_npz

    assert is_mocker_format_npz(profile)


def test_the_profile_carries_the_plans_corrected_latencies(planned, profile):
    model, plan = planned.model, planned.chosen
    data = np.load(profile)
    prefill = plan.pool(PoolRole.PREFILL)
    isl = planned.workload.isl
    looked_up = np.interp(isl, data["prefill_isl"], data["prefill_ttft_ms"])
    assert looked_up == pytest.approx(
        model.prefill_ms(prefill.tp, 1, isl) * model.corrections.prefill, rel=0.02)
    itl = data["decode_itl"]
    assert (np.diff(itl[1:, -1]) >= 0).all()  # more KV in flight, slower steps


def test_the_replay_agrees_with_the_prediction_within_ten_percent(planned, profile):
    plan = planned.chosen
    result = replay_plan(planned.model.target, plan, profile, planned.workload,
                         ttft_sla_ms=1000.0, itl_sla_ms=50.0,
                         gpus_per_node=planned.request.gpus_per_node)
    assert result.steady
    assert result.ttft_p90_ms == pytest.approx(plan.prediction.ttft_p90_ms, rel=0.10)
    # The mean TTFT of batching prefill workers is predicted on the safe side.
    assert plan.prediction.ttft_mean_ms * 0.75 <= result.ttft_mean_ms <= (
        plan.prediction.ttft_mean_ms * 1.05)
    assert result.itl_mean_ms == pytest.approx(plan.prediction.itl_ms, rel=0.10)
    assert result.served_rate == pytest.approx(plan.rate, rel=0.10)
    assert result.sla_met_share >= 0.9


def test_an_fp8_plan_names_the_fp8_checkpoint_the_workers_must_load(planned):
    request = planned.request.model_copy(update={"dtype": WeightDtype.FP8})
    topo = plan_topology(planned.chosen, request, planned.workload)
    assert topo.model.id == "nvidia/Llama-3.1-70B-Instruct-FP8"


def test_an_autoscaled_plan_hands_its_targets_and_gpus_to_dynamos_planner(
        planned, dynamo_schemas):
    request = planned.request.model_copy(update={"autoscale": True})
    topo = plan_topology(planned.chosen, request, planned.workload)
    config = dynamo_schemas.planner.model_validate(planner_config(topo, "kubernetes"))
    assert (config.ttft_ms, config.itl_ms) == (1000.0, 50.0)
    assert config.max_gpu_budget == planned.chosen.gpus


def test_a_big_deployment_is_replayed_as_a_slice_with_its_ratio_and_share_of_the_rate():
    from dis_serve.plan.replay import REPLAY_MAX_WORKERS, representative_slice, slice_workers

    big = make_plan(build_request(model="llama-3.1-70b", isl=3000, osl=500, budget=4096,
                                  ttft_ms=1000.0, itl_ms=50.0, replay=False)).chosen
    part = representative_slice(big, slice_workers(big))
    whole = [p.workers for p in big.pools]
    assert sum(part.workers) <= REPLAY_MAX_WORKERS < sum(whole)
    shares = [n / total for n, total in zip(part.workers, whole, strict=True)]
    assert max(shares) == part.share
    assert min(shares) / max(shares) >= 0.97
    assert "slice" in part.describe(big)


def test_the_offered_plan_passed_its_replay_and_any_backed_off_one_did_not(tmp_path):
    from dis_serve.plan.pipeline import run_plan

    outcome = run_plan(build_request(model="llama-3.1-70b", isl=3000, osl=500, budget=48,
                                     ttft_ms=1000.0, itl_ms=50.0), tmp_path)
    plan_replay = next(r for r in outcome.replay if r.deployment == "plan")
    assert plan_replay.passed and plan_replay.sla_met_share >= 0.9
    assert all(s.failed_because for s in outcome.verification if not s.passed)
    assert outcome.emit_refused is None


def test_a_bench_of_the_emitted_mock_graph_reports_predicted_replayed_and_measured(
        run_cli, tmp_path, monkeypatch):
    from dis_serve.bench.report import write_report
    from dis_serve.plan.vs_measured import after_bench
    from fixtures.aiperf.load import smoke_result

    monkeypatch.setenv("DIS_SERVE_LEDGER", str(tmp_path / "ledger.jsonl"))
    emitted = tmp_path / "planned.yaml"
    result = run_cli("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "32",
                     "--rate", "2", "--ttft-ms", "500", "--itl-ms", "50", "--out",
                     tmp_path / "plan", "--emit", emitted, "--mock")
    assert result.exit_code == 0, result.stderr
    measured = smoke_result().model_copy(update={"topology_file": str(emitted)})
    report_md = write_report(measured, tmp_path / "bench").markdown
    assert after_bench(measured, report_md) is not None
    report = report_md.read_text()
    section = report.split("## Plan vs measurement", 1)[1]
    for row in ("| predicted (plan) |", "| replayed (Dynamo replay) |", "| measured ("):
        assert row in section


def test_a_benched_plan_is_in_the_ledger_and_the_next_plan_prints_its_recorded_error(
        run_cli, tmp_path, monkeypatch):
    from dis_serve.bench.report import write_report
    from dis_serve.plan.ledger import read_ledger
    from dis_serve.plan.vs_measured import after_bench
    from fixtures.aiperf.load import smoke_result

    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("DIS_SERVE_LEDGER", str(ledger))
    plan = ("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "32", "--rate", "2",
            "--ttft-ms", "500", "--itl-ms", "50", "--no-replay")
    emitted = tmp_path / "planned.yaml"
    assert run_cli(*plan, "--out", tmp_path / "plan", "--emit", emitted).exit_code == 0
    measured = smoke_result().model_copy(update={"topology_file": str(emitted)})
    report_md = write_report(measured, tmp_path / "bench").markdown
    assert after_bench(measured, report_md) == len(measured.points)
    assert after_bench(measured, report_md) == 0  # the same points are not added twice
    (entry,) = [e for e in read_ledger(ledger) if e.nearest_to_plan]
    assert entry.model == "llama-3.1-8b" and entry.gpu == "h100-sxm"
    assert entry.plan_file == str(tmp_path / "plan" / "plan.json")

    again = run_cli(*plan, "--out", tmp_path / "again")
    ratio = entry.measured.itl_mean_ms / entry.predicted.itl_mean_ms
    assert "Measured against this model: TTFT x" in again.stdout
    assert f"ITL x{ratio:.2f}" in again.stdout


def test_calibrate_reads_the_ledger_for_the_planned_model_and_gpu(run_cli, tmp_path, monkeypatch):
    from dis_serve.bench.report import write_report
    from dis_serve.plan.vs_measured import after_bench
    from fixtures.aiperf.load import smoke_result

    ledger = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("DIS_SERVE_LEDGER", str(ledger))
    plan = ("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "32", "--rate", "2",
            "--ttft-ms", "500", "--itl-ms", "50", "--no-replay")
    emitted = tmp_path / "planned.yaml"
    assert run_cli(*plan, "--out", tmp_path / "plan", "--emit", emitted).exit_code == 0
    measured = smoke_result().model_copy(update={"topology_file": str(emitted)})
    after_bench(measured, write_report(measured, tmp_path / "bench").markdown)
    calibrated = run_cli(*plan, "--out", tmp_path / "again", "--calibrate", ledger)
    assert calibrated.exit_code == 0, calibrated.stderr
    assert "calibrated from" in calibrated.stdout
    other = run_cli(*plan[:2], "llama-3.1-70b", *plan[3:], "--out", tmp_path / "other",
                    "--calibrate", ledger)
    assert_one_line_error(other, "--calibrate:", "no measured point of llama-3.1-70b")
