"""How Dynamo 1.6.1 lays out a namespace in etcd and on NATS. Pure: text in, facts out.

Read off running graphs (frontend, mocker prefill/decode workers), not from documentation:
- every worker holds one etcd lease (default TTL 30 s; `ETCD_LEASE_TTL` sets it) whose id,
  in hex, ends each of its keys; the lease id is also its `instance_id`:
    v1/instances/<ns>/<component>/<endpoint>/<lease>   JSON, `transport.tcp` = host:port/...
    v1/mdc/<ns>/<component>/<endpoint>/<lease>         the model card
    v1/event_channels/namespace/<ns>/component/<c>/endpoint/<e>/topic/<t>/<publisher>
    v1/event_sources/namespace/<ns>/component/<c>/endpoint/<e>/topic/kv-events/<publisher>
      JSON: `publisher_id` and `metadata.worker.worker_id` (the publishing worker's lease)
- the frontend holds a lease with no keys;
- the NATS event plane publishes on `namespace.<ns>.component.<c>.endpoint.<e>.<topic>`, each
  message a msgpack envelope {publisher_id, sequence, published_at, topic, payload}; topics:
  kv-events (prefill/aggregated workers), kv_metrics, forward-pass-metrics,
  active_sequences_events;
- no JetStream stream is created with the default planes (core NATS only); a stream created
  for a namespace (older Dynamo releases, durable consumers) is recognized by its subjects.
"""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict

KV_EVENTS_TOPIC = "kv-events"
WORKER_ENDPOINT = "generate"  # the endpoint requests are routed to; others are auxiliary


def subject_prefix(namespace: str) -> str:
    return f"namespace.{namespace}."


def owns_key(key: str, namespace: str) -> bool:
    """True for a key of this namespace and no other: `v1/<family>/<ns>/...` or
    `v1/<family>/namespace/<ns>/...` (whole path segments, so `demo` never takes `demo-2`)."""
    parts = key.split("/")
    if len(parts) < 4 or parts[0] != "v1":
        return False
    return parts[2] == namespace or (parts[2] == "namespace" and parts[3] == namespace)


def owns_stream(subjects: list[str], namespace: str) -> bool:
    """A JetStream stream belongs to the namespace when every subject it captures does."""
    prefix = subject_prefix(namespace)
    return bool(subjects) and all(s.startswith(prefix) for s in subjects)


class InstanceKey(BaseModel):
    """One `v1/instances/...` registration, as etcd holds it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    component: str
    endpoint: str
    instance_id: str  # the lease id in hex, as in the key
    lease: int
    address: str | None  # host:port of the worker's TCP request server, if it uses TCP


def parse_instance(key: str, value: bytes, lease: int, namespace: str) -> InstanceKey | None:
    parts = key.split("/")
    if len(parts) != 6 or parts[:3] != ["v1", "instances", namespace]:
        return None
    address = None
    try:
        tcp = json.loads(value).get("transport", {}).get("tcp")
    except (ValueError, AttributeError):
        tcp = None
    if isinstance(tcp, str) and (m := re.match(r"([^/]+):(\d+)/", tcp)):
        address = f"{m.group(1)}:{m.group(2)}"
    return InstanceKey(component=parts[3], endpoint=parts[4], instance_id=parts[5],
                       lease=lease, address=address)


def parse_model_card(key: str, value: bytes, namespace: str) -> tuple[str, str] | None:
    """(instance id, served model name) of a `v1/mdc/...` model card."""
    parts = key.split("/")
    if len(parts) != 6 or parts[:3] != ["v1", "mdc", namespace]:
        return None
    try:
        name = json.loads(value)["card_json"]["display_name"]
    except (ValueError, KeyError, TypeError):
        return None
    return (parts[5], name) if isinstance(name, str) else None


def parse_kv_event_source(key: str, value: bytes) -> tuple[int, str] | None:
    """(publisher id, publishing worker's instance id in hex) of a KV-event source."""
    if "/topic/" + KV_EVENTS_TOPIC + "/" not in key or not key.startswith("v1/event_sources/"):
        return None
    try:
        data = json.loads(value)
        publisher = int(data["publisher_id"])
        worker = int(data["metadata"]["worker"]["worker_id"])
    except (ValueError, KeyError, TypeError):
        return None
    return publisher, f"{worker:x}"


def kv_events_transport(key: str, value: bytes) -> str | None:
    """How a KV-event channel travels (`Nats`, `Zmq`...), from its `v1/event_channels` key."""
    if not key.startswith("v1/event_channels/") or f"/topic/{KV_EVENTS_TOPIC}/" not in key:
        return None
    try:
        kind = json.loads(value)["transport"]["kind"]
    except (ValueError, KeyError, TypeError):
        return None
    return kind if isinstance(kind, str) else None


def envelope_publisher(payload: bytes) -> int | None:
    """The publisher id of an event-plane message (msgpack envelope)."""
    import msgspec

    try:
        envelope = msgspec.msgpack.decode(payload)
    except msgspec.DecodeError:
        return None
    publisher = envelope.get("publisher_id") if isinstance(envelope, dict) else None
    return publisher if isinstance(publisher, int) else None
