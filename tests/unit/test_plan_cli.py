"""`dis-serve plan` as a user runs it."""

from __future__ import annotations

import json

import pytest

from conftest import assert_one_line_error

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


def test_every_request_field_is_an_option_with_its_description_as_help(run_cli, monkeypatch):
    from dis_serve.plan.request import PlanRequest, flag_of

    monkeypatch.setenv("COLUMNS", "200")  # one line per option: nothing wraps mid-word
    result = run_cli("plan", "--help")
    assert result.exit_code == 0, result.stderr
    for field in PlanRequest.model_fields:
        assert flag_of(field) in result.stdout, field
    assert "--price" in result.stdout and "--price-per-gpu-hour" not in result.stdout
    assert "h100-sxm, h200, a100-80gb, l40s, l4" in result.stdout  # from the enum


def test_an_error_the_planner_keys_by_field_names_the_flag_to_change(run_cli, tmp_path):
    result = run_cli(*PLAN, "--budget", "1", "--no-replay", "--out", tmp_path)
    assert_one_line_error(result, "--budget:", "use --budget 2 or more", "--dtype")
    assert "`" not in result.stderr


def test_plan_json_reads_back_as_the_outcome_the_command_printed(run_cli, tmp_path):
    from dis_serve.plan.outcome import PlanOutcome

    result = run_cli(*PLAN, "--budget", "48", "--no-replay", "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    outcome = PlanOutcome.model_validate_json((tmp_path / "plan.json").read_text())
    assert f"{outcome.plan.gpus} GPUs, {outcome.plan.requests_per_s:.2f} req/s" in result.stdout
    assert outcome.verdict.sentence in result.stdout


@pytest.fixture(scope="module")
def bursty_trace(tmp_path_factory):
    """Prompts that arrive 32 at a time every 8 s: the planner sizes for their mean rate
    (4.4 requests/s), but no deployment it sizes that way clears a burst of 32 3000-token
    prefills within 300 ms, so every replay fails its SLA (a real failure, nothing injected)."""
    path = tmp_path_factory.mktemp("trace") / "bursts.jsonl"
    path.write_text("".join(
        json.dumps({"timestamp": burst * 8000, "input_length": 3000, "output_length": 50,
                    "hash_ids": [burst * 1000 + i * 10 + k for k in range(6)]}) + "\n"
        for burst in range(10) for i in range(32)))
    return path


def plan_bursts(run_cli, trace, out, *extra):
    return run_cli("plan", "--model", "llama-3.1-8b", "--trace", trace, "--ttft-ms", "300",
                   "--itl-ms", "40", "--out", out, "--emit", out / "emitted.yaml", "--mock",
                   *extra)


def test_emit_refuses_a_plan_that_failed_its_replay_in_one_line_exit_1(
        run_cli, bursty_trace, tmp_path):
    result = plan_bursts(run_cli, bursty_trace, tmp_path)
    outcome = json.loads((tmp_path / "plan.json").read_text())
    attained = next(r for r in outcome["replay"] if r["deployment"] == "plan")
    closest = max(outcome["verification"], key=lambda s: s["sla_met_share"])
    assert not any(s["passed"] for s in outcome["verification"])
    # Exit 1 like any run that did not deliver (RunError): the flags were valid, the plan
    # is what failed, so this is not bad input's exit 2.
    assert_one_line_error(
        result, "--emit refused", f"met the SLA for {attained['sla_met_share']:.0%}",
        f"closest: {closest['deployment']}", f"{closest['sla_met_share']:.0%}", "--force",
        code=1)
    assert not (tmp_path / "emitted.yaml").exists()
    assert outcome["emit_refused"] and (tmp_path / "topology-mock.yaml").exists()


def test_force_emits_a_plan_that_failed_its_replay_and_says_it_fails(
        run_cli, bursty_trace, tmp_path):
    result = plan_bursts(run_cli, bursty_trace, tmp_path, "--force")
    assert result.exit_code == 0, result.stderr
    assert "the plan FAILS" in result.stdout
    outcome = json.loads((tmp_path / "plan.json").read_text())
    attained = next(r for r in outcome["replay"] if r["deployment"] == "plan")
    assert not attained["passed"] and outcome["emit_refused"] is None
    emitted = (tmp_path / "emitted.yaml").read_text()
    assert emitted == (tmp_path / "topology-mock.yaml").read_text()
    assert f"{attained['sla_met_share']:.0%} of requests met the SLA" in emitted


@pytest.mark.parametrize("placement", ["slurm", "hosts"])
def test_a_cluster_placement_is_emitted_on_whole_nodes_and_passes_validate(
        run_cli, tmp_path, placement):
    import yaml

    result = run_cli(*PLAN, "--budget", "48", "--no-replay", "--placement", placement,
                     "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    assert f"Topology: {placement} placement on" in result.stdout
    topo = yaml.safe_load((tmp_path / "topology.yaml").read_text())
    gpus = sum(p["workers"] * p["tensor_parallel"] for p in topo["pools"].values())
    assert topo["hardware"]["nodes"] == -(-gpus // 8)
    assert placement in topo["placement"]
    assert "placement" not in yaml.safe_load((tmp_path / "topology-mock.yaml").read_text())
    checked = run_cli("validate", tmp_path / "topology.yaml")
    assert checked.exit_code == 0, checked.stderr


def test_prefill_workers_are_packed_beside_decode_workers_on_whole_nodes():
    from dis_serve.plan.emit import kv_local_layout
    from dis_serve.plan.recommend import make_plan
    from dis_serve.plan.request import build_request
    from dis_serve.topology import PoolRole

    plan = make_plan(build_request(model="llama-3.1-70b", isl=3000, osl=200, budget=48,
                                   ttft_ms=1000.0, itl_ms=50.0, replay=False)).chosen
    layout = kv_local_layout(plan, 8)
    ids = [g for workers in layout.gpu_ids.values() for w in workers for g in w]
    assert len(ids) == len(set(ids)) == plan.gpus
    assert all(len({g // 8 for g in w}) == 1 for ws in layout.gpu_ids.values() for w in ws)
    decode_nodes = {w[0] // 8 for w in layout.gpu_ids[PoolRole.DECODE]}
    beside = sum(w[0] // 8 in decode_nodes for w in layout.gpu_ids[PoolRole.PREFILL])
    assert beside == layout.local_prefill
    # The GPUs decode leaves on its nodes are filled with prefill before any other node.
    tp_p, tp_d = plan.pool(PoolRole.PREFILL).tp, plan.pool(PoolRole.DECODE).tp
    room = sum((8 - tp_d * sum(w[0] // 8 == n for w in layout.gpu_ids[PoolRole.DECODE])) // tp_p
               for n in decode_nodes)
    assert beside == min(room, plan.pool(PoolRole.PREFILL).workers)


def test_a_weight_format_without_a_published_checkpoint_is_refused_before_planning(
        run_cli, tmp_path):
    result = run_cli("plan", "--model", "qwen3-32b", "--dtype", "fp8", "--isl", "2000",
                     "--osl", "200", "--rate", "4", "--ttft-ms", "1000", "--itl-ms", "50",
                     "--out", tmp_path)
    assert_one_line_error(result, "no fp8 checkpoint of Qwen/Qwen3-32B", "--dtype one of bf16")
    assert not (tmp_path / "plan.json").exists()
