"""The frontend's readiness: the one path every probe of "can this frontend route the
graph's model" asks (the supervisor's, the scripts', Kubernetes', a load balancer's)."""

from __future__ import annotations

from urllib.parse import quote


def model_ready_path(model_name: str) -> str:
    """The one test of "this frontend can route the graph's model": Dynamo 1.6.1's
    `GET /v1/models/<model>/ready` answers 200 once the model is registered and every worker
    type it needs (prefill and decode, or aggregated) has a worker attached; 404 while the
    frontend does not know the model (the half second after each start in which it already
    answers requests with 404), 503 while a worker type is missing. A frontend's readiness
    probe (the supervisor's, the scripts', Kubernetes') and a load balancer's health check
    ask this path and nothing else, so "ready" means the same to all of them."""
    return f"/v1/models/{quote(model_name, safe='')}/ready"
