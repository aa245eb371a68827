"""The takeover bid (launch/floating_address.py): a node that takes the floating address over
outbids every node it knows of, so the holder it replaced cannot take it back on waking."""

from __future__ import annotations

from dis_serve.launch.floating_address import Bid, holds_address, next_bid, published_bid
from dis_serve.render.balancer import MAX_TAKEOVERS


def test_a_node_that_takes_the_address_over_bids_one_more_than_any_other():
    assert next_bid(Bid(False, 0), True, [3, 1]) == Bid(True, 4)


def test_a_node_that_keeps_the_address_keeps_its_bid():
    assert next_bid(Bid(True, 4), True, [7]) == Bid(True, 4)


def test_a_node_that_loses_the_address_keeps_its_bid_but_no_longer_holds():
    assert next_bid(Bid(True, 4), False, [5]) == Bid(False, 4)


def test_the_paused_holder_is_outbid_by_the_node_that_replaced_it():
    paused = next_bid(Bid(False, 0), True, [0])          # the first holder: bid 1
    replacement = next_bid(Bid(False, 0), True, [paused.bid])
    assert replacement.bid > paused.bid


def test_bids_stop_at_the_cap():
    assert next_bid(Bid(False, MAX_TAKEOVERS), True, [MAX_TAKEOVERS]).bid == MAX_TAKEOVERS


def test_loopback_is_held_and_an_address_of_no_interface_is_not():
    assert holds_address("127.0.0.1")
    assert not holds_address("192.0.2.123")  # TEST-NET-1: on no interface here


def test_a_missing_or_torn_published_bid_counts_as_zero(tmp_path):
    (tmp_path / "vrrp-b.json").write_text("{not json")
    assert (published_bid(tmp_path, "a"), published_bid(tmp_path, "b")) == (0, 0)
