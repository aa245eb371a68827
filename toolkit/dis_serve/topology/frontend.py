"""The OpenAI-compatible frontend and its router."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from pydantic import Field, model_validator

from .base import Port, Strict
from .enums import ProcessKind, RouterMode

# More replicas than this buys nothing a larger machine would not: each is one process with
# its own KV router, and every router follows every worker's KV events.
MAX_FRONTEND_REPLICAS = 8
# Linux interface names: at most 15 characters.
_INTERFACE_RE = re.compile(r"[A-Za-z0-9_.:-]{1,15}")


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


class FloatingAddress(Strict):
    """The one address clients use on hosts and Slurm, moved between the frontend nodes by
    VRRP (keepalived): the node holding it runs a load balancer (haproxy) over every
    frontend replica, and when that node is lost another takes the address over."""

    address: str = Field(description="An unused IPv4 address on the nodes' network (it is "
                                     "added as a /32 to the node that holds it).")
    router_id: int = Field(default=51, ge=1, le=255,
                           description="VRRP virtual router id: unique among the VRRP groups "
                                       "on that network.")
    interface: str | None = Field(
        default=None,
        description="Network interface that carries the address. Default: the interface "
                    "holding the node's own cluster address (found on each node at start).")

    @model_validator(mode="after")
    def _is_an_ipv4_address(self) -> FloatingAddress:
        try:
            ipaddress.IPv4Address(self.address)
        except ValueError:
            raise ValueError(f"frontend.floating_address.address {self.address[:60]!r} is "
                             "not an IPv4 address; give an unused address of the nodes' "
                             "network, such as 10.0.0.100") from None
        if self.interface is not None and not _INTERFACE_RE.fullmatch(self.interface):
            raise ValueError(f"frontend.floating_address.interface {self.interface[:40]!r} "
                             "is not an interface name; use one such as eth0 or ib0")
        return self


class Frontend(Strict):
    """The OpenAI-compatible HTTP frontend."""

    # None, not an address, by default: the default differs by placement, and a rendered
    # topology.json must say "unset" for a re-render to bind the same address.
    host: str | None = Field(
        default=None,
        description="Address the HTTP server binds: an IP address of this machine "
                    "(127.0.0.1, 0.0.0.0, ::1 ...) or localhost. Default: 127.0.0.1 on one "
                    "machine; the head node's cluster address on hosts and Slurm.")
    port: Port = Field(default=8000, description="HTTP port clients use: the load "
                                                 "balancer's (`balancer`), else the lone "
                                                 "frontend's own.")
    balancer: bool = Field(
        default=True,
        description="Put a load balancer (haproxy) at `port` in front of the frontend even "
                    "when there is only one, so a frontend that is starting, restarting "
                    "or dead gets no request: the balancer holds requests (up to 10 s) "
                    "until a frontend can route the model, where a lone frontend answers "
                    "HTTP 404 while it discovers the model and refuses connections while "
                    "it is down. false: the lone frontend listens at `port` itself (one "
                    "process fewer, no haproxy needed); needs replicas 1. Kubernetes "
                    "ignores it (its Service and startup probe do this job).")
    replicas: int | None = Field(
        default=None, ge=1, le=MAX_FRONTEND_REPLICAS,
        description="Frontends, each running the KV router with its own KV-event "
                    "subscription and sharing active sequences with the others "
                    "(--router-replica-sync), behind one load balancer (haproxy) at `port`. "
                    "Default: 1 on one machine; 2 on hosts and Slurm graphs of two or more "
                    "nodes, each replica on its own node (1 with balancer false).")
    replica_port: Port | None = Field(
        default=None,
        description="Behind the load balancer: replica i listens on replica_port + i (on "
                    "its node's address, loopback on one machine). Default: port + 1.")
    floating_address: FloatingAddress | None = Field(
        default=None,
        description="Hosts and Slurm: the address clients use, which survives the loss of "
                    "any node (VRRP between the frontend nodes). Unset: clients use the head "
                    "node's load balancer, which does not survive the head node.")
    balancer_url: str | None = Field(
        default=None,
        description="Hosts and Slurm: the URL of your site's own load balancer in front of "
                    "the replicas (instead of floating_address); dis-serve's clients (bench, "
                    "top, doctor, chaos, status) use it.")
    migration_limit: int = Field(
        default=3, ge=0, le=100,
        description="Times a request may move to another worker when its worker dies.")
    planned_rate_per_s: float | None = Field(
        default=None, gt=0, le=100_000,
        description="Requests per second the graph is planned for (`dis-serve plan` writes "
                    "its planned rate). Sizes the Kubernetes frontend's CPU from the measured "
                    "CPU per request; unset: 4 CPUs.")

    @model_validator(mode="after")
    def _balancer_url_is_a_url(self) -> Frontend:
        if self.balancer_url is None:
            return self
        parts = urlsplit(self.balancer_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in (
                "", "/") or parts.query or parts.fragment:
            raise ValueError(f"frontend.balancer_url {self.balancer_url[:80]!r} is not a base "
                             "URL; give scheme, host and port only, such as "
                             "https://serving.example.org:8443")
        if self.floating_address is not None:
            raise ValueError("frontend.balancer_url and frontend.floating_address are both "
                             "set; clients reach the replicas through one of them: keep one")
        return self

    @property
    def entry_kind(self) -> ProcessKind:
        """The process clients call: the balancer, or the lone frontend without one."""
        return ProcessKind.BALANCER if self.balancer else ProcessKind.FRONTEND

    @property
    def first_replica_port(self) -> int:
        """Where the first frontend behind the balancer listens: `replica_port`, else the
        port after `port` (so moving `port` moves the frontends with it)."""
        return self.replica_port if self.replica_port is not None else self.port + 1

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

