"""Named findings about a graph's coordination plane, each with its likely cause and the fix.

Pure: observations and expectations in, findings out.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from ..topology import MAX_BLOCK_SIZE
from .dynamo_layout import WORKER_ENDPOINT
from .observed import EtcdView, NatsView, Registration, TrafficView

CONSUMER_LAG_LIMIT = 1000  # undelivered messages before a JetStream consumer counts as behind


class FindingCode(StrEnum):
    ETCD_UNREACHABLE = "etcd-unreachable"
    NATS_UNREACHABLE = "nats-unreachable"
    MISSING_WORKERS = "missing-workers"
    EXTRA_WORKERS = "extra-workers"
    STALE_REGISTRATION = "stale-registration"
    PREFILL_IDLE = "prefill-registered-but-idle"
    ROUTER_NO_KV_EVENTS = "router-gets-no-kv-events"
    KV_SOURCE_MISSING = "kv-event-source-missing"
    CONSUMER_LAG = "consumer-lag"


class Finding(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    code: FindingCode
    subject: str = Field(description="What it is about: a component, an instance, a stream.")
    message: str
    cause: str = Field(description="The likely cause.")
    fix: str


class Expectations(BaseModel):
    """What the topology says the coordination plane should show."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    workers: dict[str, int] = Field(description="Dynamo component -> workers registering "
                                                "the generate endpoint.")
    prefill_components: list[str] = Field(default_factory=list)
    kv_router: bool = Field(default=False, description="The frontend routes with the KV router.")
    kv_event_components: list[str] = Field(
        default_factory=list, description="Components whose workers publish KV events.")
    kv_block_size: int | None = Field(
        default=None, description="Tokens per KV block (None: not known).")


def workers_of(etcd: EtcdView) -> list[Registration]:
    return [r for r in etcd.registrations if r.endpoint == WORKER_ENDPOINT]


def registration_findings(etcd: EtcdView, expected: Expectations | None) -> list[Finding]:
    if etcd.error:
        return [Finding(code=FindingCode.ETCD_UNREACHABLE, subject=etcd.url, message=etcd.error,
                        cause="etcd is down or the URL is wrong",
                        fix="start etcd or pass the client URL the workers use "
                            "(their ETCD_ENDPOINTS)")]
    findings = [_stale(reg) for reg in workers_of(etcd) if reg.stale]
    if expected is None:
        return findings
    live: dict[str, int] = {}
    for reg in workers_of(etcd):
        if not reg.stale:
            live[reg.component] = live.get(reg.component, 0) + 1
    for component in sorted(set(expected.workers) | set(live)):
        want, have = expected.workers.get(component, 0), live.get(component, 0)
        if have < want:
            findings.append(Finding(
                code=FindingCode.MISSING_WORKERS, subject=component,
                message=f"{have} of {want} {component} workers registered",
                cause="workers not started yet, crashed, or registered under another "
                      "namespace or etcd",
                fix="`dis-serve logs` for the missing workers; check their DYN_NAMESPACE "
                    "and ETCD_ENDPOINTS"))
        elif have > want:
            findings.append(Finding(
                code=FindingCode.EXTRA_WORKERS, subject=component,
                message=f"{have} {component} workers registered, the topology has {want}",
                cause="a process outside this graph registered in its namespace (another "
                      "graph with the same name on a shared etcd, or one started by hand)",
                fix="stop the stray process, or give each graph its own name (namespace)"))
    return findings


def _stale(reg: Registration) -> Finding:
    why = ("nothing accepts connections on " + str(reg.address) if reg.reachable is False
           else f"its health probe fails ({reg.process})")
    left = f"{reg.lease_left_s} s" if reg.lease_left_s is not None else "its TTL"
    return Finding(
        code=FindingCode.STALE_REGISTRATION, subject=f"{reg.component}/{reg.instance_id}",
        message=f"registered with a live lease ({left} left of {reg.lease_ttl_s} s) but {why}",
        cause="the worker died without revoking its lease (SIGKILL, OOM, lost node); the "
              "router keeps it in its worker set until the lease expires",
        fix=f"it disappears when the lease expires (in {left}); the frontend's "
            "--migration-limit retries requests sent to it; a shorter ETCD_LEASE_TTL on the "
            "workers shortens the window")


def nats_findings(nats: NatsView | None) -> list[Finding]:
    if nats is None:
        return []
    if nats.error:
        return [Finding(code=FindingCode.NATS_UNREACHABLE, subject=nats.url, message=nats.error,
                        cause="NATS is down or the URL is wrong",
                        fix="start nats-server (with -js) or pass the URL the workers use "
                            "(their NATS_SERVER)")]
    return [Finding(code=FindingCode.CONSUMER_LAG, subject=f"{stream.name}/{consumer}",
                    message=f"{pending} messages not yet delivered",
                    cause="the consumer's subscriber is gone or slower than the publishers",
                    fix="restart the consuming component, or delete the consumer if nothing "
                        "uses it any more")
            for stream in nats.streams for consumer, pending in stream.consumers.items()
            if pending > CONSUMER_LAG_LIMIT]


def traffic_findings(etcd: EtcdView, traffic: TrafficView | None,
                     expected: Expectations | None) -> list[Finding]:
    if traffic is None:
        return []
    return (_idle_prefill(etcd, traffic, expected) + _kv_event_findings(etcd, traffic, expected))


def _prefill_components(traffic: TrafficView, etcd: EtcdView,
                        expected: Expectations | None) -> set[str]:
    if expected is not None:
        return set(expected.prefill_components)
    prefill_ids = {i for i, kind in traffic.router_workers.items() if kind == "prefill"}
    return {r.component for r in workers_of(etcd) if r.instance_id in prefill_ids}


def _idle_prefill(etcd: EtcdView, traffic: TrafficView,
                  expected: Expectations | None) -> list[Finding]:
    if not traffic.frontend_requests:
        return []  # nothing served yet: an idle pool says nothing
    served = {w.instance_id: w.requests for w in traffic.workers}
    components = _prefill_components(traffic, etcd, expected)
    findings = []
    for reg in workers_of(etcd):
        if reg.component not in components or reg.stale or served.get(reg.instance_id) != 0:
            continue
        findings.append(Finding(
            code=FindingCode.PREFILL_IDLE, subject=f"{reg.component}/{reg.instance_id}",
            message=f"registered, but served 0 of the frontend's {traffic.frontend_requests} "
                    "requests", **_idle_cause(reg, traffic)))
    return findings


def _idle_cause(reg: Registration, traffic: TrafficView) -> dict[str, str]:
    asked = sorted(m for m, n in traffic.requests_by_model.items() if n)
    if reg.model is not None and asked and reg.model not in asked:
        return {"cause": f"it serves model {reg.model!r}, the requests were for "
                         f"{', '.join(map(repr, asked))}: its served model name differs from "
                         "the decode pool's, so no router pairs it with decode workers",
                "fix": "start it with the decode pool's served model name (the mocker's "
                       "--model-name, TRT-LLM's --served-model-name)"}
    if reg.instance_id not in traffic.router_workers:
        return {"cause": "the router has not attached it: its namespace or disaggregation "
                         "mode differ from the decode pool's",
                "fix": "start it in the graph's namespace with --disaggregation-mode prefill"}
    return {"cause": "the router attached it and never chose it: prefill is skipped "
                     "(conditional disaggregation) or other prefill workers took everything",
            "fix": "check the frontend's --router-conditional-disagg settings and the "
                   "prefill pool's load"}


def _requests_filling_a_block(traffic: TrafficView, expected: Expectations | None) -> int:
    """The frontend's requests whose prompt surely filled a KV block (a worker publishes a stored
    event per full block, none for a shorter prompt such as the readiness chat's): those
    longer than the frontend histogram's first bound at or above the block size, the largest
    block size the topology allows when the graph's is not known."""
    block = (expected.kv_block_size if expected is not None and expected.kv_block_size
             else MAX_BLOCK_SIZE)
    bounds = [b for b in traffic.prompts_over if b >= block]
    return traffic.prompts_over[min(bounds)] if bounds else 0


def _kv_event_findings(etcd: EtcdView, traffic: TrafficView,
                       expected: Expectations | None) -> list[Finding]:
    kv_router = (expected.kv_router if expected is not None
                 else traffic.router_follows_kv_events is not None)
    if not kv_router:
        return []
    if traffic.router_follows_kv_events is False:
        return [Finding(
            code=FindingCode.ROUTER_NO_KV_EVENTS, subject="frontend",
            message="the KV router does not subscribe to KV events; it only predicts cache "
                    "contents from its own routing decisions",
            cause="the frontend runs with --no-router-kv-events (router.kv_events: false)",
            fix="set router.kv_events: true (the frontend's --router-kv-events) so routing "
                "follows what the workers really hold")]
    findings = []
    publishing = set(etcd.kv_publishers.values())
    wanted = set(expected.kv_event_components) if expected is not None else set()
    silent = [r for r in workers_of(etcd)
              if r.component in wanted and not r.stale and r.instance_id not in publishing]
    if traffic.router_follows_kv_events and silent:
        names = ", ".join(f"{r.component}/{r.instance_id}" for r in silent)
        findings.append(Finding(
            code=FindingCode.ROUTER_NO_KV_EVENTS, subject=names,
            message="the router follows KV events, but these workers registered no KV-event "
                    "source",
            cause="the workers do not publish KV events (TRT-LLM without "
                  "--publish-kv-events, or an event plane the router does not read)",
            fix="start them with --publish-kv-events and the same DYN_EVENT_PLANE as the "
                "frontend"))
    filled = _requests_filling_a_block(traffic, expected)
    if traffic.router_follows_kv_events and filled and not silent \
            and traffic.kv_events_applied == 0:
        findings.append(Finding(
            code=FindingCode.ROUTER_NO_KV_EVENTS, subject="frontend",
            message=f"the router follows KV events but applied none over {filled} requests "
                    "whose prompts fill a KV block",
            cause="the events do not reach it: workers and frontend on different event "
                  "planes (DYN_EVENT_PLANE) or NATS servers",
            fix="give every process the same DYN_EVENT_PLANE and NATS_SERVER"))
    if traffic.kv_source_mismatch:
        findings.append(Finding(
            code=FindingCode.KV_SOURCE_MISSING, subject="frontend",
            message=f"the router has no KV-event source for {traffic.kv_source_mismatch} "
                    "serving workers",
            cause="workers that disabled KV-event publishing or registered no recovery "
                  "target",
            fix="start every prefill/aggregated worker with KV events on"))
    return findings
