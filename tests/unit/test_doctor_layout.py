"""Reading Dynamo 1.6.1's etcd keys and Prometheus text, on data captured from real graphs."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec

from dis_serve.coordination.dynamo_layout import (
    envelope_publisher,
    kv_events_transport,
    owns_key,
    owns_stream,
    parse_instance,
    parse_kv_event_source,
    parse_model_card,
)
from dis_serve.coordination.traffic import frontend_facts, worker_traffic

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dynamo"
NS = "dis-serve-explore2"


def _keys() -> list[dict]:
    return json.loads((FIXTURES / "etcd-keys.json").read_text())


def test_every_captured_key_belongs_to_its_namespace_and_not_to_a_longer_name():
    keys = [k["key"] for k in _keys()]
    assert all(owns_key(k, NS) for k in keys)
    assert not any(owns_key(k, "dis-serve-explore") for k in keys)
    assert not any(owns_key(k.replace(NS, NS + "-2"), NS) for k in keys)


def test_a_stream_belongs_to_a_namespace_only_when_all_its_subjects_do():
    mine = f"namespace.{NS}.component.prefill.endpoint.generate.kv-events"
    assert owns_stream([mine], NS)
    assert not owns_stream([mine, "namespace.other.>"], NS)
    assert not owns_stream([mine.replace(NS, NS + "-2")], NS)
    assert not owns_stream([], NS)


def test_instances_are_read_with_component_endpoint_lease_and_tcp_address():
    instances = [inst for k in _keys()
                 if (inst := parse_instance(k["key"], k["value"].encode(), int(k["lease"]), NS))]
    generate = {i.component: i for i in instances if i.endpoint == "generate"}
    assert set(generate) == {"prefill", "backend"}
    for inst in generate.values():
        assert int(inst.instance_id, 16) == inst.lease  # the key ends in the lease id
        host, _, port = inst.address.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0


def test_the_model_cards_name_the_served_model_of_each_instance():
    cards = {c for k in _keys() if (c := parse_model_card(k["key"], k["value"].encode(), NS))}
    instances = {k["key"].rsplit("/", 1)[1] for k in _keys()
                 if k["key"].startswith(f"v1/instances/{NS}/") and "/generate/" in k["key"]}
    assert cards == {(i, "demo-model") for i in instances}


def test_the_kv_event_source_names_the_prefill_worker_that_publishes():
    sources = [s for k in _keys() if (s := parse_kv_event_source(k["key"], k["value"].encode()))]
    prefill = next(k for k in _keys() if k["key"].startswith(f"v1/instances/{NS}/prefill/gen"))
    assert [worker for _publisher, worker in sources] == [prefill["key"].rsplit("/", 1)[1]]
    publisher = sources[0][0]
    assert envelope_publisher(msgspec.msgpack.encode({"publisher_id": publisher,
                                                      "topic": "kv-events"})) == publisher


def test_the_kv_event_channel_says_it_travels_over_nats():
    kinds = {t for k in _keys() if (t := kv_events_transport(k["key"], k["value"].encode()))}
    assert kinds == {"Nats"}


def test_the_frontend_metrics_tell_whether_the_kv_router_follows_events():
    on = frontend_facts((FIXTURES / "frontend-kv-events.prom").read_text())
    off = frontend_facts((FIXTURES / "frontend-no-kv-events.prom").read_text())
    assert on["router_follows_kv_events"] is True
    assert off["router_follows_kv_events"] is False
    assert sorted(on["router_workers"].values()) == ["decode", "prefill"]
    assert on["frontend_requests"] == off["frontend_requests"] == 3


def test_the_frontends_prompt_histogram_counts_the_requests_longer_than_each_bound():
    on = frontend_facts((FIXTURES / "frontend-kv-events.prom").read_text())
    assert on["prompts_over"][0.0] == on["prompts_over"][100.0] == 3
    assert on["prompts_over"][130000.0] == 0


def test_the_routers_worker_ids_are_the_etcd_instance_ids():
    on = frontend_facts((FIXTURES / "frontend-kv-events.prom").read_text())
    instances = {k["key"].rsplit("/", 1)[1] for k in _keys()
                 if k["key"].startswith(f"v1/instances/{NS}/") and "/generate/" in k["key"]}
    assert set(on["router_workers"]) == instances


def test_a_workers_generate_requests_are_counted_and_auxiliary_endpoints_are_not():
    [worker] = worker_traffic((FIXTURES / "prefill-worker.prom").read_text())
    assert worker.component == "prefill"
    assert worker.requests == 5
