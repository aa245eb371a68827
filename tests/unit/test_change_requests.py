"""The targets of `scale POOL=N` and of a planner decision, from the running topology:
bounds held, bad input one UserInputError naming it."""

from __future__ import annotations

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.change.autoscaler import decision_counts
from dis_serve.change.targets import scale_target
from dis_serve.errors import UserInputError
from dis_serve.topology import PoolRole, Topology


def _demo(**decode) -> Topology:
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["pools"]["decode"] |= decode
    return Topology.model_validate(data)


def test_scale_sets_each_named_pools_worker_count():
    target = scale_target(_demo(), ["decode=3", "prefill=2"])
    assert (target.pools.prefill.workers, target.pools.decode.workers) == (2, 3)


@pytest.mark.parametrize(("requests", "says"), [
    ([], "no POOL=N given"),
    (["decode"], "'decode' is not POOL=N"),
    (["decode=3", "decode=1"], "decode is given twice"),
    (["agg=2"], "has no pool 'agg'"),
    (["decode=0"], "below pools.decode.min_workers (1)"),
    (["decode=5"], "above the pool's ceiling of 4"),
    (["decode=9"], "pools need 10 GPUs"),
])
def test_bad_scale_requests_are_refused_naming_what_is_wrong(requests, says):
    topo = _demo(max_workers=4) if requests == ["decode=5"] else _demo()
    with pytest.raises(UserInputError, match=says.replace("(", r"\(").replace(")", r"\)")):
        scale_target(topo, requests)


def test_a_planner_decision_is_held_between_each_pools_bounds():
    topo = _demo(workers=2, min_workers=2, max_workers=3)
    assert decision_counts(topo, prefill=1, decode=7) == {PoolRole.PREFILL: 1,
                                                          PoolRole.DECODE: 3}
    assert decision_counts(topo, prefill=1, decode=1) == {PoolRole.PREFILL: 1,
                                                          PoolRole.DECODE: 2}


def test_a_component_the_planner_has_not_decided_is_left_as_it_is():
    assert decision_counts(_demo(), prefill=-1, decode=2) == {PoolRole.DECODE: 2}
