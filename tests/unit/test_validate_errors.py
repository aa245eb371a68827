"""`dis-serve validate` on bad input: one line naming file, key and fix; exit 2; no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import GRAPHS, assert_one_line_error
from conftest import topology_variant as _variant

DEMO = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
DISAGG_70B = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "topology.yaml"
    path.write_text(text)
    return path


def test_unknown_key_suggests_the_closest_known_key(run_cli, tmp_path):
    text = (GRAPHS / "demo.yaml").read_text().replace("served_name:", "servd_name:")
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "topology.yaml", "model.servd_name",
                           "did you mean 'served_name'")


def test_yaml_11_no_stays_a_string_and_is_rejected_by_name(run_cli, tmp_path):
    result = run_cli("validate", _write(tmp_path, _variant(DEMO, router__kv_events="no")
                                        .replace("kv_events: 'no'", "kv_events: no")))
    assert_one_line_error(result, "router.kv_events", '"no"', "true or false")


def test_leading_zero_number_is_not_read_as_octal(run_cli, tmp_path):
    text = _variant(DEMO, frontend__port=8000).replace("port: 8000", "port: 010", 1)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "frontend.port", '"010"', "leading zeros")


def test_colon_number_is_not_read_as_sexagesimal(run_cli, tmp_path):
    text = _variant(DEMO).replace("workers: 1", "workers: 1:30", 1)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools.prefill.workers", '"1:30"')


def test_duplicate_keys_are_refused(run_cli, tmp_path):
    text = (GRAPHS / "demo.yaml").read_text() + "backend: trtllm\n"
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "duplicate key 'backend'", "line")


def test_anchors_and_aliases_are_refused(run_cli, tmp_path):
    text = _variant(DEMO).replace("prefill:\n", "prefill: &p\n", 1) + "extra: *p\n"
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "anchors and aliases", "write the values out")


def test_python_tags_are_refused_without_running_anything(run_cli, tmp_path):
    text = _variant(DEMO) + "name: !!python/object/apply:os.system ['touch pwned']\n"
    result = run_cli("validate", _write(tmp_path, text))
    assert result.exit_code == 2
    assert not (tmp_path / "pwned").exists()
    assert "not accepted" in result.stderr


def test_files_over_one_mebibyte_are_refused(run_cli, tmp_path):
    text = _variant(DEMO) + "#" + "x" * (1024 * 1024) + "\n"
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "over 1024 KiB")


def test_tensor_parallel_must_divide_kv_heads(run_cli, tmp_path):
    text = _variant(DISAGG_70B, pools__decode__tensor_parallel=3)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools.decode.tensor_parallel 3", "attention_heads",
                           "use one of [1, 2, 4, 8]")


def test_a_worker_must_fit_one_node(run_cli, tmp_path):
    text = _variant(DISAGG_70B, hardware__gpus_per_node=4, hardware__nodes=12,
                    pools__decode__tensor_parallel=8, pools__decode__workers=5)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "tensor_parallel 8", "largest node (4)",
                          "use tensor_parallel 4 (the largest that fits)")


def test_a_gpu_id_used_twice_is_refused(run_cli, tmp_path):
    text = _variant(DEMO, pools__prefill__gpu_ids=[[0]], pools__decode__gpu_ids=[[0]])
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools.decode.gpu_ids", "GPU id 0 is already used by "
                           "pools.prefill.gpu_ids")


def test_pools_larger_than_the_hardware_are_refused(run_cli, tmp_path):
    text = _variant(DISAGG_70B, pools__decode__workers=11)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools need 52 GPUs", "the placement has 48")


def test_memory_overflow_says_by_how_much_and_what_fits(run_cli, tmp_path):
    text = _variant(DISAGG_70B, model__dtype="bf16", model__kv_cache_dtype="bf16",
                    pools__decode__tensor_parallel=2, pools__decode__workers=20)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools.decode", "GiB short", "lower max_batch_size to")


def test_system_ports_stay_within_what_dynamo_accepts(run_cli, tmp_path):
    text = _variant(DEMO, observability__system_port_base=32767)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "observability.system_port_base 32767", "set it to 32766")


def test_two_components_on_one_port_are_refused(run_cli, tmp_path):
    text = _variant(DEMO, frontend__port=9100)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "port 9100 is used by both frontend.port",
                           "system_port_base")


@pytest.mark.parametrize("buffer", [2048, 3072])
def test_kv_transfer_buffer_must_exceed_the_longest_input(run_cli, tmp_path, buffer):
    text = _variant(DISAGG_70B, kv_transfer__max_tokens_in_buffer=buffer)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, f"max_tokens_in_buffer {buffer}", "3072",
                           "set it above 3072, e.g. 4096")


def test_a_missing_file_is_named(run_cli, tmp_path):
    result = run_cli("validate", tmp_path / "nope.yaml")
    assert_one_line_error(result, "nope.yaml", "file not found")


def test_debug_shows_the_traceback(run_cli, tmp_path):
    text = _variant(DEMO, frontend__port=9100)
    with pytest.raises(Exception, match="port 9100"):
        run_cli("--debug", "validate", _write(tmp_path, text))


def test_an_unknown_model_needs_its_architecture(run_cli, tmp_path):
    text = _variant(DEMO, model__id="acme/unknown-13b")
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "model.architecture is required", "config.json")


def test_mode_and_pools_must_agree(run_cli, tmp_path):
    text = _variant(DEMO, mode="agg")
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "pools.prefill is set but mode is agg", "set mode: disagg")


def test_fp8_on_the_bf16_checkpoint_is_refused_naming_nvidias_fp8_checkpoint(run_cli, tmp_path):
    text = _variant(DISAGG_70B, model__id="meta-llama/Llama-3.1-70B-Instruct")
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "model.dtype is fp8", "is the bf16 checkpoint",
                           "set model.id: nvidia/Llama-3.1-70B-Instruct-FP8")


def test_a_known_bf16_checkpoint_cannot_be_declared_prequantized(run_cli, tmp_path):
    text = _variant(DISAGG_70B, model__id="meta-llama/Llama-3.1-70B-Instruct",
                    model__prequantized=True)
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "is the bf16 checkpoint", "nvidia/Llama-3.1-70B-Instruct-FP8")


def test_awq_without_a_catalog_checkpoint_names_model_optimizer(run_cli, tmp_path):
    text = _variant(DISAGG_70B, model__id="meta-llama/Llama-3.1-70B-Instruct", model__dtype="awq")
    result = run_cli("validate", _write(tmp_path, text))
    assert_one_line_error(result, "model.dtype is awq", "Model Optimizer",
                           "model.prequantized: true")


def test_an_own_checkpoint_declared_prequantized_is_accepted(run_cli, tmp_path):
    arch = {"layers": 80, "attention_heads": 64, "kv_heads": 8, "hidden_size": 8192,
            "params_billion": 70.6}
    text = _variant(DISAGG_70B, model__id="/models/llama70b-int8", model__dtype="int8",
                    model__architecture=arch, model__prequantized=True)
    assert run_cli("validate", _write(tmp_path, text)).exit_code == 0
    text = _variant(DISAGG_70B, model__id="/models/llama70b-int8", model__dtype="int8",
                    model__architecture=arch)
    assert_one_line_error(run_cli("validate", _write(tmp_path, text)),
                          "is not known to hold int8 weights", "model.prequantized: true")


def test_deeply_nested_yaml_is_refused_in_one_line(run_cli, tmp_path):
    result = run_cli("validate", _write(tmp_path, "name: " + "[" * 5000 + "]" * 5000))
    assert_one_line_error(result, "topology.yaml", "nested more than")


def test_ctrl_c_in_a_command_exits_130_with_one_line(run_cli, tmp_path, monkeypatch):
    def interrupted(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr("dis_serve.inputs.yaml_input.load_model_file", interrupted)
    result = run_cli("validate", tmp_path / "any.yaml")
    assert_one_line_error(result, "interrupted", code=130)
