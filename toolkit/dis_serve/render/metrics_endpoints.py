"""Where each process of a launch plan serves Prometheus `/metrics`: read by `bench` (AIPerf
scrapes them) and by the doctor (traffic findings)."""

from __future__ import annotations

import ipaddress

from pydantic import BaseModel, ConfigDict

from .launch_plan import LaunchPlan, ProcessSpec

FRONTEND = "frontend"


class MetricsEndpoint(BaseModel):
    """One Prometheus endpoint and the pool it speaks for (`frontend`, `prefill`, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str
    pool: str


def worker_metrics_url(worker: ProcessSpec, frontend_host: str) -> str:
    """A worker's `/metrics` on its system port. On one machine workers bind loopback on
    the frontend's host, so the host is the frontend URL's; on a multi-node graph each
    serves at its own node's address, where its probe goes."""
    host = frontend_host if _is_loopback(worker.probed_host) else worker.probed_host
    return f"http://{host}:{worker.ports['system']}/metrics"


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def graph_endpoints(plan: LaunchPlan, frontend_url: str) -> list[MetricsEndpoint]:
    """The frontend's and every worker's `/metrics`, from the launch plan's system ports."""
    host = _host_of(frontend_url)
    endpoints = [MetricsEndpoint(url=f"{frontend_url.rstrip('/')}/metrics", pool=FRONTEND)]
    for worker in plan.workers:
        assert worker.role is not None
        endpoints.append(MetricsEndpoint(url=worker_metrics_url(worker, host),
                                         pool=worker.role.value))
    return endpoints


def _host_of(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].rsplit(":", 1)[0]
