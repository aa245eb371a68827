"""Benchmark scenarios: the shipped ones load, bad ones fail in one line naming file, key, fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dis_serve.bench.scenario import LoadKind, Scenario, SweepPoint, load_scenario
from dis_serve.errors import UserInputError

BENCHMARKS = REPO / "benchmarks"
SMOKE = yaml.safe_load((BENCHMARKS / "smoke.yaml").read_text())


def _write(tmp_path: Path, data: dict | str) -> Path:
    path = tmp_path / "scenario.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def _smoke(**changes) -> dict:
    data = {k: v for k, v in SMOKE.items()}
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return data


@pytest.mark.parametrize("name", ["smoke", "chat", "long-prompt", "trace", "shared-prefix",
                                  "multi-turn"])
def test_shipped_scenarios_load(name):
    scenario = load_scenario(BENCHMARKS / f"{name}.yaml")
    assert scenario.name == name
    assert scenario.points()


def test_long_prompt_has_the_seeds_shape_3000_in_200_out():
    scenario = load_scenario(BENCHMARKS / "long-prompt.yaml")
    assert scenario.input_tokens.mean == 3000
    assert scenario.output_tokens.mean == 200


def test_points_follow_the_listed_order_and_kind():
    scenario = load_scenario(BENCHMARKS / "smoke.yaml")
    assert [p.value for p in scenario.points()] == [float(c) for c in SMOKE["concurrency"]]
    assert {p.kind for p in scenario.points()} == {LoadKind.CONCURRENCY}


def test_request_rate_sweep_gives_request_rate_points(tmp_path):
    scenario = load_scenario(_write(tmp_path, _smoke(concurrency=None, request_rate=[0.5, 2])))
    assert [p.slug for p in scenario.points()] == ["request_rate-0.5", "request_rate-2"]


def test_point_slugs_are_file_names():
    assert SweepPoint(kind=LoadKind.CONCURRENCY, value=16).slug == "concurrency-16"


def test_unknown_key_suggests_the_closest(tmp_path):
    path = _write(tmp_path, _smoke(concurency=[1, 2]))
    with pytest.raises(UserInputError, match=r"concurency.*did you mean 'concurrency'"):
        load_scenario(path)


def test_unknown_nested_key_names_its_path(tmp_path):
    path = _write(tmp_path, _smoke(sla={"ttft_ms": 100, "itl": 10}))
    with pytest.raises(UserInputError, match=r"sla\.itl.*did you mean 'itl_ms'"):
        load_scenario(path)


def test_requests_and_duration_together_are_refused(tmp_path):
    with pytest.raises(UserInputError, match="exactly one of requests"):
        load_scenario(_write(tmp_path, _smoke(duration_s=30)))


def test_a_sweep_is_required(tmp_path):
    with pytest.raises(UserInputError, match=r"concurrency: .* and request_rate"):
        load_scenario(_write(tmp_path, _smoke(concurrency=None)))


def test_empty_sweep_is_refused(tmp_path):
    with pytest.raises(UserInputError, match="concurrency is empty"):
        load_scenario(_write(tmp_path, _smoke(concurrency=[])))


def test_a_load_level_listed_twice_is_refused(tmp_path):
    with pytest.raises(UserInputError, match="lists a value twice"):
        load_scenario(_write(tmp_path, _smoke(concurrency=[1, 4, 4])))


def test_concurrency_above_the_request_count_is_refused(tmp_path):
    with pytest.raises(UserInputError, match="concurrency 64 is above requests"):
        load_scenario(_write(tmp_path, _smoke(requests=8, concurrency=[1, 64])))


def test_sla_is_required(tmp_path):
    with pytest.raises(UserInputError, match="sla: required key is missing"):
        load_scenario(_write(tmp_path, _smoke(sla=None)))


def test_quoted_number_is_not_coerced(tmp_path):
    with pytest.raises(UserInputError, match="requests"):
        load_scenario(_write(tmp_path, _smoke(requests="24")))


def test_error_names_the_file(tmp_path):
    path = _write(tmp_path, _smoke(name="Smoke Test"))
    with pytest.raises(UserInputError) as info:
        load_scenario(path)
    assert str(path) in str(info.value)
    assert "lower-case" in str(info.value)


def test_every_field_is_described():
    def walk(model):
        for name, field in model.model_fields.items():
            if name in ("kind", "value"):
                continue
            assert field.description, f"{model.__name__}.{name}"
    from dis_serve.bench.scenario import MultiTurn, SharedPrefix, Sla, TokenLengths, Trace

    for model in (Scenario, TokenLengths, Sla, SharedPrefix, MultiTurn, Trace):
        walk(model)


def test_trace_path_is_relative_to_the_scenario_file():
    scenario = load_scenario(BENCHMARKS / "trace.yaml")
    assert scenario.trace.file == BENCHMARKS / "traces" / "sample-mooncake.jsonl"
    assert [p.kind for p in scenario.points()] == [LoadKind.SPEEDUP] * 2


def test_missing_trace_file_is_one_line_naming_the_key(tmp_path):
    path = _write(tmp_path, {"name": "tr", "trace": {"file": "nowhere.jsonl"},
                             "sla": {"ttft_ms": 1, "itl_ms": 1}})
    with pytest.raises(UserInputError, match=r"trace\.file") as info:
        load_scenario(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("clash", ["concurrency", "requests", "input_tokens"])
def test_a_trace_brings_its_own_requests_and_timing(tmp_path, clash):
    extra = {"concurrency": [2], "requests": 8, "input_tokens": {"mean": 8}}[clash]
    path = _write(tmp_path, {"name": "tr", "trace": {"file": str(BENCHMARKS / "trace.yaml")},
                             "sla": {"ttft_ms": 1, "itl_ms": 1}, clash: extra})
    with pytest.raises(UserInputError, match=f"remove {clash}"):
        load_scenario(path)


def test_a_trace_cannot_draw_its_blocks_from_random_tokens(tmp_path):
    path = _write(tmp_path, {"name": "tr", "trace": {"file": str(BENCHMARKS / "trace.yaml")},
                             "prompt_corpus": "random", "sla": {"ttft_ms": 1, "itl_ms": 1}})
    with pytest.raises(UserInputError, match="use sonnet or coding"):
        load_scenario(path)


def test_a_shared_prefix_must_leave_unique_tokens(tmp_path):
    path = _write(tmp_path, _smoke(input_tokens={"mean": 4},
                                   shared_prefix={"ratio": 0.9, "prefixes": 2}))
    with pytest.raises(UserInputError, match="leaves no unique tokens"):
        load_scenario(path)


def test_input_buckets_must_increase(tmp_path):
    with pytest.raises(UserInputError, match="increasing order"):
        load_scenario(_write(tmp_path, _smoke(input_buckets=[4096, 1024])))
