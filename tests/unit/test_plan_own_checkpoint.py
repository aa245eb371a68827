"""Planning a model AIConfigurator ships no config for (Llama-2-70B, MLPerf's model), in a
weight format the catalog publishes no checkpoint of: the user's own export."""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error
from dis_serve.errors import UserInputError
from dis_serve.plan.aiconfigurator_model import model_config_path
from dis_serve.plan.emit import plan_topology
from dis_serve.plan.recommend import make_plan
from dis_serve.plan.request import build_request
from dis_serve.topology import Topology

OWN_FP8 = "/models/llama-2-70b-chat-fp8"
MLPERF_LIKE = {"model": "llama-2-70b", "gpu": "h200", "isl": 400, "osl": 291, "budget": 8,
               "tp": 1, "ttft_ms": 60000.0, "itl_ms": 1000.0, "dtype": "fp8",
               "kv_cache_dtype": "fp8", "arrival": "offline", "replay": False}


@pytest.fixture(scope="module")
def planned():
    return make_plan(build_request(**MLPERF_LIKE, checkpoint=OWN_FP8))


def test_aiconfigurator_reads_our_config_for_a_model_it_ships_none_of():
    path = model_config_path("meta-llama/Llama-2-70b-chat-hf")
    assert path is not None and path.endswith("meta-llama--Llama-2-70b-chat-hf")
    # Where AIConfigurator ships the config, it is asked by name.
    assert model_config_path("meta-llama/Meta-Llama-3.1-70B") == "meta-llama/Meta-Llama-3.1-70B"
    assert model_config_path("nobody/unknown") is None


def test_llama_2_70b_is_planned_on_aiconfigurators_measured_data(planned):
    assert planned.model.source.value == "aiconfigurator"
    assert "Llama-2-70b-chat-hf" in planned.model.detail
    assert planned.chosen.tokens_per_s_per_gpu > 0


def test_a_format_without_a_published_checkpoint_names_the_checkpoint_option():
    with pytest.raises(UserInputError, match="give `checkpoint`: your own fp8 export"):
        build_request(**MLPERF_LIKE)


def test_the_emitted_topology_loads_the_users_checkpoint_as_prequantized(planned, tmp_path):
    topo = plan_topology(planned.chosen, planned.request, planned.workload)
    assert topo.model.id == OWN_FP8
    assert topo.model.prequantized
    # A path the catalog cannot name carries the architecture the checks need.
    assert topo.model.resolved_architecture() == planned.request.known_model.architecture
    Topology.model_validate(topo.model_dump(exclude_unset=True))


def test_a_sequence_longer_than_the_models_context_is_refused():
    with pytest.raises(UserInputError, match="longer than meta-llama/Llama-2-70b-chat-hf's "
                                             "4096-token context"):
        build_request(**MLPERF_LIKE | {"isl": 4000, "osl": 100}, checkpoint=OWN_FP8)


def test_the_cli_takes_the_checkpoint_flag(run_cli, tmp_path):
    refused = run_cli("plan", "--model", "llama-2-70b", "--dtype", "fp8", "--isl", "400",
                      "--osl", "291", "--budget", "8", "--ttft-ms", "60000", "--itl-ms", "1000",
                      "--out", tmp_path)
    assert_one_line_error(refused, "no fp8 checkpoint of meta-llama/Llama-2-70b-chat-hf",
                          "--checkpoint")
