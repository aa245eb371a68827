"""TRT-LLM engine configs: the keys NVIDIA's own generator writes, the values the topology says.

The key-and-type reference is AIConfigurator's TensorRT-LLM `extra_engine_args` template for
1.3.0rc23, the newest TRT-LLM it generates for (Dynamo 1.6.1 pins TRT-LLM 1.3.0rc29), rendered
with every optional block switched on.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import jinja2
import pytest
import yaml

from conftest import GRAPHS
from dis_serve.engines.trtllm import cuda_graph_batch_sizes, load_template
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.render.engine_config import render_engine_configs
from dis_serve.topology import PoolRole, Topology

TRTLLM_GRAPHS = ["llama70b-h100-disagg.yaml", "llama70b-h100-agg.yaml", "llama8b-8gpu-disagg.yaml"]


def _nvidia_reference() -> dict:
    template_dir = resources.files("aiconfigurator") / "generator/config/backend_templates/trtllm"
    text = (template_dir / "extra_engine_args.1.3.0rc23.yaml.j2").read_text()
    rendered = jinja2.Template(text).render(
        tensor_parallel_size=4, pipeline_parallel_size=1, max_batch_size=8,
        max_num_tokens=8192, max_seq_len=4096, enable_chunked_prefill=True,
        kv_cache_config={"free_gpu_memory_fraction": 0.9, "dtype": "fp8",
                         "tokens_per_block": 32, "enable_block_reuse": True},
        cache_transceiver_config={"backend": "DEFAULT", "max_tokens_in_buffer": 4096},
        cuda_graph_config={"enable_padding": True, "batch_sizes": [1, 2]},
        disable_overlap_scheduler=True, print_iter_log=False, speculative_config={})
    return yaml.safe_load(rendered)


def _leaves(config: dict, prefix: str = "") -> dict[str, object]:
    out = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_leaves(value, path + "."))
        else:
            out[path] = value
    return out


def _configs(graph: str) -> dict[PoolRole, dict]:
    return render_engine_configs(load_model_file(Topology, GRAPHS / graph))


@pytest.mark.parametrize("graph", TRTLLM_GRAPHS)
def test_every_key_is_one_nvidias_generator_writes_with_the_same_type(graph):
    reference = _leaves(_nvidia_reference())
    for config in _configs(graph).values():
        for path, value in _leaves(config).items():
            if value is None:  # a config block switched off (cuda_graph_config: null)
                assert any(ref.startswith(f"{path}.") for ref in reference), path
                continue
            assert path in reference, f"{path} is not a TRT-LLM engine arg NVIDIA generates"
            expected = type(reference[path])
            assert isinstance(value, expected) or (expected is float and
                                                    isinstance(value, int)), (path, value)


def test_prefill_turns_the_overlap_scheduler_off_and_decode_keeps_it():
    configs = _configs("llama70b-h100-disagg.yaml")
    assert configs[PoolRole.PREFILL]["disable_overlap_scheduler"] is True
    assert configs[PoolRole.DECODE]["disable_overlap_scheduler"] is False


def test_both_sides_of_a_disaggregated_graph_get_the_cache_transceiver():
    topo = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
    for config in render_engine_configs(topo).values():
        transceiver = config["cache_transceiver_config"]
        assert transceiver["backend"] == "NIXL"
        # Dynamo's examples: the buffer must exceed the longest input.
        assert transceiver["max_tokens_in_buffer"] > topo.model.max_input_tokens


def test_aggregated_workers_have_no_cache_transceiver():
    config = _configs("llama70b-h100-agg.yaml")[PoolRole.AGG]
    assert "cache_transceiver_config" not in config


def test_pool_sizing_and_kv_cache_come_from_the_topology():
    topo = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
    decode = render_engine_configs(topo)[PoolRole.DECODE]
    pool = topo.pools.decode
    assert decode["tensor_parallel_size"] == pool.tensor_parallel
    assert decode["max_batch_size"] == pool.max_batch_size
    assert decode["max_num_tokens"] == pool.max_num_tokens
    assert decode["max_seq_len"] == topo.model.max_input_tokens + topo.model.max_output_tokens
    assert decode["kv_cache_config"]["dtype"] == "fp8"
    assert decode["kv_cache_config"]["free_gpu_memory_fraction"] == \
        load_template(PoolRole.DECODE)["kv_cache_config"]["free_gpu_memory_fraction"]


def test_kv_cache_share_defaults_per_role_as_nvidias_disagg_recipe():
    configs = _configs("llama70b-h100-disagg.yaml")
    fractions = {role: config["kv_cache_config"]["free_gpu_memory_fraction"]
                 for role, config in configs.items()}
    # deepseek-r1/disagg/simple: prefill 0.75 (activations for long prompts), decode 0.85.
    assert fractions == {PoolRole.PREFILL: 0.75, PoolRole.DECODE: 0.85}


def test_a_pools_own_kv_cache_share_overrides_the_role_default():
    data = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())
    data["pools"]["decode"]["free_gpu_memory_fraction"] = 0.8
    configs = render_engine_configs(Topology.model_validate(data))
    assert configs[PoolRole.DECODE]["kv_cache_config"]["free_gpu_memory_fraction"] == 0.8
    assert configs[PoolRole.PREFILL]["kv_cache_config"]["free_gpu_memory_fraction"] == 0.75


def test_prefill_captures_no_cuda_graphs_and_decode_captures_its_batch_sizes():
    configs = _configs("llama70b-h100-disagg.yaml")
    # Written as null: an omitted key means TRT-LLM's default CudaGraphConfig() (graphs on).
    assert configs[PoolRole.PREFILL]["cuda_graph_config"] is None
    assert configs[PoolRole.DECODE]["cuda_graph_config"]["batch_sizes"][-1] == 256


def test_cuda_graphs_cover_every_batch_up_to_the_limit():
    assert cuda_graph_batch_sizes(256) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert cuda_graph_batch_sizes(96) == [1, 2, 4, 8, 16, 32, 64, 96]
    assert cuda_graph_batch_sizes(1) == [1]


def test_the_package_reads_the_engine_templates_users_edit_in_configs():
    from conftest import REPO
    from dis_serve.builtin import ENGINE_TEMPLATES

    assert ENGINE_TEMPLATES.resolve() == REPO / "configs"
    assert sorted(p.name for p in (ENGINE_TEMPLATES / "trtllm").iterdir()) == [
        "agg.yaml", "decode.yaml", "prefill.yaml"]


def test_no_tracked_symlink_dangles():
    import subprocess

    from conftest import REPO

    listed = subprocess.run(["git", "ls-files", "-s"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    links = [REPO / line.split("\t", 1)[1] for line in listed if line.startswith("120000")]
    assert [link for link in links if not link.exists()] == []


def test_every_local_workers_extra_engine_args_names_a_file_render_writes(tmp_path):
    from dis_serve.placements.files import Target, render_files

    topo = load_model_file(Topology, GRAPHS / "llama8b-8gpu-disagg.yaml")
    files = render_files(topo, Target.LOCAL, tmp_path)
    plan = json.loads(files["local/launch-plan.json"])
    named = {Path(w["argv"][w["argv"].index("--extra-engine-args") + 1]).relative_to(tmp_path)
             for w in plan["processes"] if w["kind"] == "worker"}
    assert named == {Path(f"local/engine-configs/{role}.yaml") for role in ("prefill", "decode")}
    assert {str(path) for path in named} <= set(files)
