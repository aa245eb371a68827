"""`schema`, `init`, `validate` and `render` as a user runs them."""

from __future__ import annotations

import json

import yaml

from conftest import GRAPHS, assert_one_line_error


def test_schema_prints_a_json_schema_with_described_fields(run_cli):
    result = run_cli("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "Topology"
    assert "description" in schema["$defs"]["Pool"]["properties"]["tensor_parallel"]
    assert schema["additionalProperties"] is False


def test_init_writes_a_starter_that_validates(run_cli, tmp_path):
    target = tmp_path / "mine.yaml"
    assert run_cli("init", target).exit_code == 0
    assert target.read_text().startswith("# dis-serve topology")
    result = run_cli("validate", target)
    assert result.exit_code == 0, result.stderr
    assert "ok" in result.stdout


def test_init_does_not_overwrite_without_force(run_cli, tmp_path):
    target = tmp_path / "mine.yaml"
    target.write_text("keep me\n")
    result = run_cli("init", target)
    assert result.exit_code == 2
    assert target.read_text() == "keep me\n"


def test_validate_reports_every_good_file(run_cli):
    result = run_cli("validate", *sorted(GRAPHS.glob("*.yaml")))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.count("ok ") == len(list(GRAPHS.glob("*.yaml")))


def test_render_all_writes_local_plan_script_engine_configs_and_manifest(run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "llama8b-8gpu-disagg.yaml", "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    plan = json.loads((tmp_path / "local" / "launch-plan.json").read_text())
    workers = [p for p in plan["processes"] if p["kind"] == "worker"]
    assert [w["name"] for w in workers] == ["prefill-0", "prefill-1", "decode-0", "decode-1",
                                            "decode-2"]
    assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in workers] == ["0", "1", "2,3", "4,5",
                                                                   "6,7"]
    assert (tmp_path / "local" / "launch.sh").stat().st_mode & 0o111
    decode = yaml.safe_load((tmp_path / "local" / "engine-configs" / "decode.yaml").read_text())
    assert decode["tensor_parallel_size"] == 2
    kinds = [d["kind"] for d in yaml.safe_load_all((tmp_path / "k8s" / "deployment.yaml")
                                                    .read_text())]
    # Two frontend replicas in a cluster, at most one drained at a time (issue 29).
    assert kinds == ["PersistentVolumeClaim", "Job", "ConfigMap", "NetworkPolicy",
                     "PodDisruptionBudget", "DynamoGraphDeployment"]


def test_render_rejects_an_unknown_target(run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "demo.yaml", "--target", "helm", "--out", tmp_path)
    assert result.exit_code == 2
    assert "--target" in result.stderr and "local, k8s, hosts, slurm or all" in result.stderr
    assert not any(tmp_path.iterdir())


def test_everything_binds_loopback_in_the_local_plan(run_cli, tmp_path):
    run_cli("render", GRAPHS / "demo.yaml", "--target", "local", "--out", tmp_path)
    plan = json.loads((tmp_path / "local" / "launch-plan.json").read_text())
    for process in plan["processes"]:
        argv = " ".join(process["argv"])
        assert "0.0.0.0" not in argv
        for key, value in process["env"].items():
            if key.endswith("_HOST"):
                assert value == "127.0.0.1"


def test_a_bad_option_value_is_a_usage_error_not_a_traceback(run_cli):
    result = run_cli("up", "--timeout", "soon")
    # One line naming the flag and the value (issue 32), no longer click's usage block.
    assert_one_line_error(result, "--timeout", "soon")


def test_rendering_the_demo_for_kubernetes_warns_that_its_card_is_local(run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "demo.yaml", "--target", "k8s", "--out", tmp_path)
    assert result.exit_code == 0
    assert "cannot download" in result.stdout and "model.id" in result.stdout


def test_a_local_model_path_is_refused_for_kubernetes_naming_the_claim_fix(run_cli, tmp_path):
    data = yaml.safe_load((GRAPHS / "llama8b-8gpu-disagg.yaml").read_text())
    data["model"]["id"] = "/data/llama-3.1-8b-instruct"
    path = tmp_path / "local-path.yaml"
    path.write_text(yaml.safe_dump(data))
    result = run_cli("render", path, "--target", "k8s", "--out", tmp_path / "out")
    assert_one_line_error(result, "model.id", "/data/llama-3.1-8b-instruct",
                          "kubernetes.model_cache.existing: true")
    assert not (tmp_path / "out").exists()
    assert run_cli("render", path, "--target", "local", "--out", tmp_path / "out").exit_code == 0
