"""Probing etcd while it starts: ready once its port accepts, as Dynamo needs it, not once its
/health answers (which blocks through the leader election); /health stays its liveness check.
The "etcd" here is a loopback socket that accepts connections and never answers."""

from __future__ import annotations

import socket

import yaml

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.coordination.probes import http_client, probe_process
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import Topology


def _silent_listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # the kernel completes connects; nothing ever reads or answers
    return listener


def _etcd_spec_on(port: int):
    data = yaml.safe_load(DEMO_TOPOLOGY.read_text())
    data["security"] = {"tls": {"mode": "off"}}  # /health over plain HTTP
    data["coordination"] = {"etcd": {"client_port": port, "peer_port": port + 1}}
    plan = render_launch_plan(Topology.model_validate(data), RenderContext(run_dir="/r"))
    return plan, plan.process("etcd")


def test_a_starting_etcd_is_ready_once_its_port_accepts():
    with _silent_listener() as listener:
        plan, spec = _etcd_spec_on(listener.getsockname()[1])
        assert spec.readiness.url is not None  # the test means something: an HTTP probe
        with http_client(0.3) as client:
            probe = probe_process(client, spec, plan, starting=True)
    assert probe.ready and probe.answered


def test_a_running_etcd_that_does_not_answer_its_health_probe_is_not_ready():
    with _silent_listener() as listener:
        plan, spec = _etcd_spec_on(listener.getsockname()[1])
        with http_client(0.3) as client:
            probe = probe_process(client, spec, plan)
    assert not probe.ready and not probe.answered
