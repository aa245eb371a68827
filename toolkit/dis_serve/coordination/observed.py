"""What the doctor observed (frozen models; the topology is the spec, this is the state)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Registration(_Frozen):
    """One worker endpoint registered in etcd under the namespace."""

    component: str
    endpoint: str
    instance_id: str = Field(description="The lease id (hex) that ends its keys.")
    lease_ttl_s: int | None = Field(description="TTL the lease was granted with.")
    lease_left_s: int | None = Field(description="Seconds until the lease expires unless "
                                                 "renewed; None when etcd did not say.")
    address: str | None = Field(description="host:port of its TCP request server.")
    model: str | None = Field(default=None, description="The model name its card serves.")
    reachable: bool | None = Field(
        default=None, description="Its request server accepts connections (None: not "
                                  "checked, e.g. NATS request plane).")
    process: str | None = Field(default=None, description="Our process that holds it.")
    healthy: bool | None = Field(
        default=None, description="That process's /health says ready (None: unknown).")

    @property
    def stale(self) -> bool:
        """The lease is alive but the worker behind it is gone or failing its probe."""
        return self.reachable is False or self.healthy is False


class EtcdView(_Frozen):
    url: str
    error: str | None = Field(default=None, description="Why etcd could not be read.")
    keys: int = Field(default=0, description="Keys the namespace owns.")
    registrations: list[Registration] = Field(default_factory=list)
    kv_publishers: dict[str, str] = Field(
        default_factory=dict,
        description="KV-event publisher id -> publishing worker's instance id.")
    kv_event_transports: list[str] = Field(
        default_factory=list, description="How the KV-event channels travel (Nats, Zmq).")


class StreamView(_Frozen):
    name: str
    subjects: list[str]
    messages: int
    consumers: dict[str, int] = Field(description="Consumer -> messages not yet delivered.")


class NatsView(_Frozen):
    url: str
    error: str | None = None
    server_version: str | None = None
    jetstream: bool = False
    streams: list[StreamView] = Field(
        default_factory=list, description="JetStream streams that belong to the namespace.")
    window_s: float = 0.0
    subjects: dict[str, int] = Field(
        default_factory=dict, description="Messages per namespace subject in the window.")
    kv_events: dict[str, int] = Field(
        default_factory=dict,
        description="KV events per publisher id in the window.")


class WorkerTraffic(_Frozen):
    instance_id: str
    component: str
    requests: int = Field(description="Requests its `generate` handler has served.")


class TrafficView(_Frozen):
    """From the frontend's and the workers' Prometheus metrics."""

    error: str | None = None
    frontend_requests: int | None = Field(
        default=None, description="Requests the frontend has answered.")
    requests_by_model: dict[str, int] = Field(
        default_factory=dict, description="The frontend's requests per model name.")
    router_workers: dict[str, str] = Field(
        default_factory=dict, description="Instance id -> worker type the router routes to.")
    router_follows_kv_events: bool | None = Field(
        default=None, description="The KV router subscribes to KV events (None: no KV "
                                  "router seen).")
    kv_events_applied: int = Field(
        default=0, description="KV events the router has applied to its index (with "
                               "--no-router-kv-events: its own predictions).")
    kv_source_mismatch: int = Field(
        default=0, description="Workers the router expected KV events from and has no "
                               "source for.")
    prompts_over: dict[float, int] = Field(
        default_factory=dict, description="Bound of the frontend's prompt-token histogram -> "
                                          "its requests with a longer prompt.")
    workers: list[WorkerTraffic] = Field(default_factory=list)
    unreachable: list[str] = Field(default_factory=list, description="Metrics URLs that failed.")
