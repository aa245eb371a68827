"""`compare` arms: two files, or one topology with one key varied; bad --vary is one line."""

from __future__ import annotations

import pytest

from conftest import GRAPHS
from dis_serve.bench.arms import file_arms, parse_vary, vary_arms
from dis_serve.errors import UserInputError
from dis_serve.topology import RouterMode

AGG = GRAPHS / "agg-mocker.yaml"


def test_vary_gives_one_arm_per_value_differing_only_in_that_key():
    kv, rr = vary_arms(AGG, *parse_vary("router.mode=kv,round-robin"))
    assert (kv.topology.router.mode, rr.topology.router.mode) == (
        RouterMode.KV, RouterMode.ROUND_ROBIN)
    assert kv.topology.model_dump(exclude={"router"}) == rr.topology.model_dump(
        exclude={"router"})
    assert (kv.label, kv.slug) == ("router.mode=kv", "router-mode-kv")


def test_vary_values_are_read_as_yaml_numbers():
    one, two = vary_arms(AGG, *parse_vary("pools.agg.workers=1,2"))
    assert (one.topology.total_gpus, two.topology.total_gpus) == (1, 2)


def test_a_value_the_schema_refuses_names_key_and_value():
    with pytest.raises(UserInputError) as info:
        vary_arms(AGG, *parse_vary("router.mode=kv,fastest"))
    assert "router.mode=fastest" in str(info.value)


@pytest.mark.parametrize("text", ["router.mode", "router.mode=kv", "Router.Mode=a,b",
                                  "router.mode=kv,kv"])
def test_malformed_vary_is_refused(text):
    with pytest.raises(UserInputError, match="--vary"):
        parse_vary(text)


def test_two_files_of_one_name_get_told_apart():
    a, b = file_arms([AGG, AGG])
    assert (a.slug, b.slug) == ("a-agg-mocker", "b-agg-mocker")
