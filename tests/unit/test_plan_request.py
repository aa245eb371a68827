"""What `dis-serve plan` accepts, and the one-line errors for what it does not."""

from __future__ import annotations

import json

import pytest

from dis_serve.errors import UserInputError
from dis_serve.plan.request import CHAT_TEMPLATE_TOKENS, Objective, Workload, build_request


def ask(**overrides):
    values = {"model": "llama-3.1-70b", "isl": 3000, "osl": 500, "budget": 48,
              "ttft_ms": 1000.0, "itl_ms": 50.0} | overrides
    return build_request(**values)


def test_a_budget_asks_for_the_most_goodput_and_a_rate_for_the_fewest_gpus():
    assert ask().objective is Objective.MOST_GOODPUT
    assert ask(budget=None, rate=10.0).objective is Objective.FEWEST_GPUS


def test_hugging_face_ids_name_catalog_models():
    assert ask(model="meta-llama/Llama-3.1-70B-Instruct").target().name == "llama-3.1-70b"


def test_an_unknown_model_is_named_with_the_models_that_would_work():
    with pytest.raises(UserInputError) as err:
        ask(model="gpt-5")
    assert err.value.key == "model"
    assert "llama-3.1-70b, llama-3.1-8b, llama-2-70b, qwen3-32b" in str(err.value)


def test_an_unknown_gpu_lists_the_catalog():
    with pytest.raises(UserInputError) as err:
        ask(gpu="tpu-v5")
    assert "h100-sxm" in str(err.value) and err.value.key == "gpu"


def test_rate_and_budget_together_are_refused():
    with pytest.raises(UserInputError, match="either `rate` or `budget`"):
        ask(rate=5.0)


def test_lengths_are_required_without_a_trace():
    with pytest.raises(UserInputError, match="`isl` and `osl`"):
        ask(osl=None)


def test_the_price_defaults_to_the_catalog_and_can_be_overridden():
    assert ask().hourly_price == pytest.approx(2.99)
    assert ask(price_per_gpu_hour=1.5).hourly_price == 1.5


def write_trace(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_trace_gives_mean_lengths_longest_lengths_and_its_arrival_rate(tmp_path):
    trace = write_trace(tmp_path / "t.jsonl", [
        {"timestamp": 0, "input_length": 1000, "output_length": 100, "hash_ids": [1, 2]},
        {"timestamp": 500, "input_length": 3000, "output_length": 300, "hash_ids": [3]},
        {"timestamp": 1000, "input_length": 2000, "output_length": 200, "hash_ids": [4]},
    ])
    workload = Workload.of(ask(isl=None, osl=None, budget=None, trace=trace))
    assert (workload.isl, workload.osl) == (2000, 200)
    # The longest prompt, with room for the chat template around it.
    assert (workload.max_isl, workload.max_osl) == (3000 + CHAT_TEMPLATE_TOKENS, 300)
    assert workload.rate == pytest.approx(2.0)


def test_a_line_that_is_not_a_mooncake_request_is_named(tmp_path):
    trace = tmp_path / "bad.jsonl"
    trace.write_text('{"input_length": 10, "output_length": 5}\n{"prompt": "hi"}\n')
    with pytest.raises(UserInputError, match="line 2"):
        Workload.of(ask(isl=None, osl=None, trace=trace))


def test_a_split_is_given_as_prefill_colon_decode_gpus():
    assert ask(compare_split="8:40").compare_split == (8, 40)
    with pytest.raises(UserInputError, match="PREFILL:DECODE") as err:
        ask(compare_split="8:0")
    assert err.value.key == "compare_split"


def test_gpus_per_node_defaults_to_the_topologys_hardware_section():
    from dis_serve.topology import Hardware

    assert ask().gpus_per_node == Hardware().gpus_per_node
