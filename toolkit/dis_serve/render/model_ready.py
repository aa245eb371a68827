"""The frontend's readiness: the one home of what every probe of "can this frontend route the
graph's model" asks (the supervisor's, the scripts', Kubernetes', a load balancer's).

Ready = the model-ready path answers 200 AND, since it last turned 200, one routed chat
(`routed_chat`) has been answered 200. The first is Dynamo 1.6.1's registration readiness:
it counts the live workers of each worker type the model needs. It turns 200 the moment the
decode worker set is attached, but in a disaggregated graph the frontend then activates the
decode set's prefill router asynchronously, and until that is done every chat is refused
("Prefill router target is still activating" in the frontend's log, then HTTP 503 "Service
temporarily unavailable" once its migration retries are spent): 1-35 ms on an idle machine,
80 ms in one CI run. Dynamo exposes no state that covers the activation, so the probe asks
the chat path itself, once per transition to ready; afterwards the GET alone tells a
frontend that still routes from one that lost a worker type (which resets the transition).
"""

from __future__ import annotations

from urllib.parse import quote, urlsplit

ROUTED_CHAT_PATH = "/v1/chat/completions"


def model_ready_path(model_name: str) -> str:
    """Dynamo 1.6.1's `GET /v1/models/<model>/ready`: 200 once the model is registered and
    every worker type it needs (prefill and decode, or aggregated) has a live worker; 404
    while the frontend does not know the model (the half second after each start in which it
    already answers requests with 404), 503 while a worker type is missing. Necessary, not
    sufficient: see the module's docstring and `routed_chat`."""
    return f"/v1/models/{quote(model_name, safe='')}/ready"


def routed_chat(model_name: str) -> dict[str, object]:
    """The chat that proves the frontend routes the model: one prompt word, one output token
    (a prefill of a few tokens and no decode step worth the name, on any engine), sent only
    when the model-ready path has just turned 200, so once per frontend start."""
    return {"model": model_name, "max_tokens": 1,
            "messages": [{"role": "user", "content": "ready"}]}


def routed_chat_url(ready_url: str) -> str:
    """The chat URL on the same frontend (scheme, host and port) as its model-ready URL."""
    parts = urlsplit(ready_url)
    return f"{parts.scheme}://{parts.netloc}{ROUTED_CHAT_PATH}"
