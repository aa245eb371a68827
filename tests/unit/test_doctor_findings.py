"""The doctor's findings from observations (pure), and its bad-input errors."""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error
from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.coordination.doctor import expectations
from dis_serve.coordination.findings import (
    CONSUMER_LAG_LIMIT,
    FindingCode,
    nats_findings,
    registration_findings,
    traffic_findings,
)
from dis_serve.coordination.observed import (
    EtcdView,
    NatsView,
    Registration,
    StreamView,
    TrafficView,
    WorkerTraffic,
)
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, GraphStatus
from dis_serve.topology import Topology

DEMO = expectations(load_model_file(Topology, DEMO_TOPOLOGY))


def _reg(component: str, instance: str, **state) -> Registration:
    return Registration(component=component, endpoint="generate", instance_id=instance,
                        lease_ttl_s=30, lease_left_s=20, address="127.0.0.1:1",
                        **({"reachable": True} | state))


def _etcd(*regs: Registration) -> EtcdView:
    return EtcdView(url="http://127.0.0.1:2379", registrations=list(regs))


def _codes(findings) -> list[FindingCode]:
    return [f.code for f in findings]


def test_the_demo_expects_one_prefill_and_one_decode_worker_with_kv_events_from_prefill():
    assert DEMO.workers == {"prefill": 1, "backend": 1}
    assert DEMO.kv_event_components == ["prefill"] and DEMO.kv_router


def test_a_healthy_graph_has_no_registration_findings():
    assert registration_findings(_etcd(_reg("prefill", "a"), _reg("backend", "b")), DEMO) == []


def test_a_live_lease_without_a_process_is_stale_and_its_component_short():
    etcd = _etcd(_reg("prefill", "a"), _reg("backend", "b", reachable=False))
    findings = registration_findings(etcd, DEMO)
    assert _codes(findings) == [FindingCode.STALE_REGISTRATION, FindingCode.MISSING_WORKERS]
    assert findings[0].subject == "backend/b" and "20 s left of 30 s" in findings[0].message


def test_a_failing_health_probe_makes_a_registration_stale_too():
    etcd = _etcd(_reg("prefill", "a", healthy=False, process="prefill-0"), _reg("backend", "b"))
    assert FindingCode.STALE_REGISTRATION in _codes(registration_findings(etcd, DEMO))


def test_a_registration_the_topology_does_not_have_is_extra():
    etcd = _etcd(_reg("prefill", "a"), _reg("prefill", "c"), _reg("backend", "b"))
    assert _codes(registration_findings(etcd, DEMO)) == [FindingCode.EXTRA_WORKERS]


def test_an_unreachable_etcd_is_the_only_registration_finding():
    etcd = EtcdView(url="http://127.0.0.1:1", error="refused")
    assert _codes(registration_findings(etcd, DEMO)) == [FindingCode.ETCD_UNREACHABLE]


def _traffic(prefill_requests: int, attached: bool = True, **facts) -> TrafficView:
    router = {"b": "decode"} | ({"a": "prefill"} if attached else {})
    return TrafficView(frontend_requests=4, router_workers=router,
                       workers=[WorkerTraffic(instance_id="a", component="prefill",
                                              requests=prefill_requests),
                                WorkerTraffic(instance_id="b", component="backend", requests=4)],
                       **({"router_follows_kv_events": True, "kv_events_applied": 9,
                           "prompts_over": {0.0: 4, 100.0: 4, 210.0: 0}} | facts))


def _published() -> EtcdView:
    view = _etcd(_reg("prefill", "a"), _reg("backend", "b"))
    return view.model_copy(update={"kv_publishers": {"7": "a"}})


def test_a_prefill_worker_that_served_nothing_while_the_frontend_served_is_idle():
    findings = traffic_findings(_published(), _traffic(0, attached=False), DEMO)
    assert _codes(findings) == [FindingCode.PREFILL_IDLE]
    assert "has not attached it" in findings[0].cause


def test_an_idle_prefill_worker_serving_another_model_name_is_told_so():
    etcd = _published()
    typo = etcd.registrations[0].model_copy(update={"model": "typo-model"})
    etcd = etcd.model_copy(update={"registrations": [typo, *etcd.registrations[1:]]})
    traffic = _traffic(0).model_copy(update={"requests_by_model": {"demo-model": 4}})
    [finding] = traffic_findings(etcd, traffic, DEMO)
    assert "serves model 'typo-model', the requests were for 'demo-model'" in finding.cause


def test_a_prefill_pool_serving_requests_is_not_idle():
    assert traffic_findings(_published(), _traffic(4), DEMO) == []


def test_a_kv_router_without_kv_events_is_named_with_the_flag_to_change():
    findings = traffic_findings(_published(), _traffic(4, router_follows_kv_events=False), DEMO)
    assert _codes(findings) == [FindingCode.ROUTER_NO_KV_EVENTS]
    assert "--no-router-kv-events" in findings[0].cause


def test_prefill_workers_with_no_kv_event_source_are_named():
    etcd = _etcd(_reg("prefill", "a"), _reg("backend", "b"))  # no event source registered
    findings = traffic_findings(etcd, _traffic(4), DEMO)
    assert _codes(findings) == [FindingCode.ROUTER_NO_KV_EVENTS]
    assert findings[0].subject == "prefill/a"


def test_a_router_that_follows_events_but_applied_none_over_prompts_filling_a_block_is_named():
    findings = traffic_findings(_published(), _traffic(4, kv_events_applied=0), DEMO)
    assert _codes(findings) == [FindingCode.ROUTER_NO_KV_EVENTS]
    assert "applied none over 4 requests whose prompts fill a KV block" in findings[0].message


def test_no_kv_events_are_expected_from_prompts_too_short_to_fill_a_block():
    # The readiness chat's few tokens store no full block, so no worker publishes an event.
    short = _traffic(4, kv_events_applied=0, prompts_over={0.0: 4, 100.0: 0})
    assert traffic_findings(_published(), short, DEMO) == []


def test_an_unknown_block_size_counts_only_prompts_longer_than_the_largest_block():
    traffic = _traffic(4, kv_events_applied=0, prompts_over={100.0: 4, 870.0: 2, 1800.0: 1})
    unknown = DEMO.model_copy(update={"kv_block_size": None})
    [finding] = traffic_findings(_published(), traffic, unknown)
    assert "over 1 requests" in finding.message


def test_a_consumer_far_behind_its_stream_is_named_and_one_keeping_up_is_not():
    stream = StreamView(name="S", subjects=["namespace.x.>"], messages=5000,
                        consumers={"behind": CONSUMER_LAG_LIMIT + 1, "current": 0})
    findings = nats_findings(NatsView(url="nats://127.0.0.1:4222", streams=[stream]))
    assert [(f.code, f.subject) for f in findings] == [(FindingCode.CONSUMER_LAG, "S/behind")]


def test_a_graph_that_does_not_exist_is_bad_input(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    assert_one_line_error(run_cli("doctor", "nothing-here"), "nothing-here")


def test_a_stopped_graph_is_bad_input_not_an_unreachable_etcd(run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    run = RunDir.for_graph("old")
    run.prepare()
    run.write_state(GraphStatus(
        name="old", namespace="dis-serve-old", run_dir=str(run.path), endpoint="http://x",
        model_name="m", supervisor_pid=2**22 + 7, supervisor_create_time=1.0,
        phase=GraphPhase.STOPPED, started_at=1.0, processes=[]))
    assert_one_line_error(run_cli("doctor", "old"), "'old' is not running")


@pytest.mark.parametrize(("args", "fragments"), [
    (["demo", "--etcd", "http://127.0.0.1:2379"], ["NAME", "both"]),
    (["--etcd", "http://127.0.0.1:2379"], ["--namespace", "missing"]),
    (["--etcd", "127.0.0.1:2379", "--namespace", "ns"], ["--etcd", "http://"]),
    (["--etcd", "http://h:2379", "--namespace", "ns", "--nats", "http://h:4222"], ["--nats"]),
    (["--watch", "--json"], ["--watch"]),
    (["--count", "3"], ["--count", "--watch"]),
    (["--clean", "dis-serve-x"], ["--clean", "--etcd"]),
])
def test_bad_doctor_input_is_one_line_and_exit_code_2(run_cli, args, fragments):
    assert_one_line_error(run_cli("doctor", *args), *fragments)
