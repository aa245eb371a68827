"""The OpenAI-compatible frontend and its router."""

from __future__ import annotations

import ipaddress

from pydantic import Field, model_validator

from .base import Port, Strict
from .enums import RouterMode


class Router(Strict):
    """The frontend's router."""

    mode: RouterMode = Field(default=RouterMode.KV, description="kv | round-robin | random.")
    kv_events: bool = Field(
        default=True,
        description="KV router: follow the workers' KV events (else predict cache contents).")
    policy_config: str | None = Field(
        default=None,
        description="KV router: Dynamo router-policy YAML (--router-policy-config). Since "
                    "Dynamo 1.6 the cost weights (prefill_load_scale, router_temperature, "
                    "overlap_score_credit) live there; the old per-weight flags are "
                    "deprecated and dis-serve does not emit them.")


class Frontend(Strict):
    """The OpenAI-compatible HTTP frontend."""

    # None, not an address, by default: the default differs by placement, and a rendered
    # topology.json must say "unset" for a re-render to bind the same address.
    host: str | None = Field(
        default=None,
        description="Address the HTTP server binds: an IP address of this machine "
                    "(127.0.0.1, 0.0.0.0, ::1 ...) or localhost. Default: 127.0.0.1 on one "
                    "machine; the head node's cluster address on hosts and Slurm.")
    port: Port = Field(default=8000, description="HTTP port.")
    migration_limit: int = Field(
        default=3, ge=0, le=100,
        description="Times a request may move to another worker when its worker dies.")
    planned_rate_per_s: float | None = Field(
        default=None, gt=0, le=100_000,
        description="Requests per second the graph is planned for (`dis-serve plan` writes "
                    "its planned rate). Sizes the Kubernetes frontend's CPU from the measured "
                    "CPU per request; unset: 4 CPUs.")

    @property
    def local_host(self) -> str:
        """The address a graph on one machine binds."""
        return self.host or "127.0.0.1"

    @model_validator(mode="after")
    def _host_is_an_address(self) -> Frontend:
        if self.host is None or self.host == "localhost":
            return self
        try:
            ipaddress.ip_address(self.host)
        except ValueError:
            raise ValueError(f"frontend.host {self.host[:60]!r} is not an IP address; the "
                             "server binds an address, not a name: use 127.0.0.1 (this machine "
                             "only), 0.0.0.0 (every interface) or one of this machine's "
                             "addresses") from None
        return self

