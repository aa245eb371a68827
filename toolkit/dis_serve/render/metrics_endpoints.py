"""Where each process of a launch plan serves Prometheus `/metrics`: read by `bench` (AIPerf
scrapes them) and by the doctor (traffic findings)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from .launch_plan import LaunchPlan

FRONTEND = "frontend"


class MetricsEndpoint(BaseModel):
    """One Prometheus endpoint and the pool it speaks for (`frontend`, `prefill`, ...)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    url: str
    pool: str


def graph_endpoints(plan: LaunchPlan, frontend_url: str) -> list[MetricsEndpoint]:
    """The frontend's and every worker's `/metrics`, from the launch plan's system ports.

    Workers bind loopback on the frontend's host, so the host comes from the frontend URL.
    """
    host = _host_of(frontend_url)
    endpoints = [MetricsEndpoint(url=f"{frontend_url.rstrip('/')}/metrics", pool=FRONTEND)]
    for worker in plan.workers:
        assert worker.role is not None
        endpoints.append(MetricsEndpoint(
            url=f"http://{host}:{worker.ports['system']}/metrics", pool=worker.role.value))
    return endpoints


def _host_of(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0].rsplit(":", 1)[0]
