"""Run directories, process identity and the preflight checks that need no processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from dis_serve.builtin import DEMO_TOPOLOGY
from dis_serve.engines.mocker import WORKER_USS_MIB as MOCKER_WORKER_USS_MIB
from dis_serve.errors import PreflightError
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.ansi import strip_ansi
from dis_serve.launch.preflight import (
    check_memory,
    check_ports,
    exposure_warnings,
    find_binary,
    port_key,
)
from dis_serve.launch.process import create_time, same_process
from dis_serve.launch.rundir import RunDir, default_root, list_runs
from dis_serve.launch.status import GraphPhase, GraphStatus
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import Topology


def test_runs_live_under_dis_serve_home(monkeypatch, tmp_path):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    assert RunDir.for_graph("demo").path == tmp_path / "runs" / "demo"


def test_runs_default_to_dot_dis_serve_in_the_working_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("DIS_SERVE_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_root() == tmp_path / ".dis-serve"


def test_list_runs_finds_every_graph_directory(tmp_path):
    for name in ("bb", "aa"):
        RunDir.for_graph(name, tmp_path).prepare()
    assert [r.name for r in list_runs(tmp_path)] == ["aa", "bb"]


def test_tail_returns_the_last_lines_without_colour(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    run.prepare()
    run.log_file("etcd").write_text("".join(f"\x1b[2mline {i}\x1b[0m\n" for i in range(50)))
    assert run.tail("etcd", 3) == ["line 47", "line 48", "line 49"]


def test_tail_of_a_missing_log_is_empty(tmp_path):
    assert RunDir.for_graph("gr", tmp_path).tail("nope") == []


def test_strip_ansi_removes_rust_log_colours():
    assert strip_ansi("\x1b[2m2026\x1b[0m \x1b[32m INFO\x1b[0m x") == "2026  INFO x"


def test_a_pid_is_ours_only_with_its_create_time():
    mine = create_time(os.getpid())
    assert same_process(os.getpid(), mine)
    assert not same_process(os.getpid(), (mine or 0) - 100)
    assert not same_process(os.getpid(), None)


def test_binaries_are_found_next_to_the_interpreter_first():
    found = find_binary("nats-server")
    assert found == str(Path(sys.executable).parent / "nats-server")


def test_etcd_distros_python_wrapper_is_skipped_for_the_real_binary():
    found = find_binary("etcd")
    assert found is not None
    assert Path(found).read_bytes()[:4] == b"\x7fELF"


def test_port_conflicts_name_the_topology_key_to_change():
    topo = load_model_file(Topology, DEMO_TOPOLOGY)
    plan = render_launch_plan(topo, RenderContext(run_dir=Path("/run/x")))
    keys = {(spec.name, name): port_key(spec, name, plan)
            for spec in plan.processes for name in spec.ports}
    assert keys == {
        ("etcd", "client"): "coordination.etcd.client_port",
        ("etcd", "peer"): "coordination.etcd.peer_port",
        ("nats", "client"): "coordination.nats.port",
        ("balancer", "http"): "frontend.port",
        ("frontend", "replica"): "frontend.replica_port",
        ("prefill-0", "system"): "observability.system_port_base + 0",
        ("decode-0", "system"): "observability.system_port_base + 1",
    }


def _demo(**update) -> Topology:
    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json")
    for dotted, value in update.items():
        section, key = dotted.split("__")
        data[section][key] = value
    return Topology.model_validate(data)


def test_a_loopback_graph_on_the_nats_event_plane_has_no_exposure_warning():
    assert exposure_warnings(_demo(coordination__event_plane="nats")) == []


def test_the_zmq_event_plane_is_flagged_for_binding_every_interface():
    warning = exposure_warnings(_demo(coordination__event_plane="zmq"))[0]
    assert "0.0.0.0" in warning and "event_plane: nats" in warning


def test_a_frontend_on_a_public_address_is_flagged_as_https_without_client_auth():
    warnings = exposure_warnings(_demo(frontend__host="0.0.0.0",
                                       coordination__event_plane="nats"))
    assert warnings[0].startswith("frontend.host is 0.0.0.0: the OpenAI endpoint is reachable "
                                  "from the network over HTTPS, without client authentication")
    assert "security.tls.frontend_client_certs: true" in warnings[0]


def test_a_plain_http_frontend_on_a_public_address_is_flagged_as_unauthenticated():
    warnings = exposure_warnings(_demo(frontend__host="0.0.0.0", security__tls={"frontend": False},
                                       coordination__event_plane="nats"))
    assert warnings[0] == ("frontend.host is 0.0.0.0: the OpenAI endpoint is reachable from "
                           "the network, without authentication")


def test_a_public_frontend_that_asks_for_client_certificates_is_not_flagged():
    assert exposure_warnings(_demo(frontend__host="0.0.0.0",
                                   security__tls={"frontend_client_certs": True},
                                   coordination__event_plane="nats")) == []


def test_follow_yields_only_lines_appended_after_it_started(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    run.prepare()
    run.log_file("frontend").write_text("old\n")
    lines = run.follow(["frontend"], poll_s=0.01)
    with run.log_file("frontend").open("a") as log:
        log.write("\x1b[32mnew\x1b[0m\nhalf")
    assert next(lines) == ("frontend", "new")
    with run.log_file("frontend").open("a") as log:
        log.write(" done\n")
    assert next(lines) == ("frontend", "half done")


def test_a_frontend_host_that_is_not_this_machines_is_not_called_a_port_in_use():
    topo = _demo(frontend__host="192.0.2.1")  # TEST-NET-1: never a local address
    plan = render_launch_plan(topo, RenderContext(run_dir=Path("/run/x")))
    plan = plan.model_copy(update={"processes": [plan.process("balancer")]})
    with pytest.raises(PreflightError, match="not an address of this machine"):
        check_ports(plan, topo)


def test_a_run_directory_and_its_files_are_private(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    run.prepare()
    run.write_state(_status("gr"))
    os.close(run.open_log("frontend"))
    assert run.path.stat().st_mode & 0o777 == 0o700
    assert run.logs.stat().st_mode & 0o777 == 0o700
    assert run.state_file.stat().st_mode & 0o777 == 0o600
    assert run.log_file("frontend").stat().st_mode & 0o777 == 0o600


def test_a_log_past_its_size_is_rotated_in_place_and_the_writer_appends_on(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    fd = run.open_log("frontend")  # what a child process holds
    try:
        for generation in range(4):
            os.write(fd, f"gen{generation} ".encode() * 10)
            assert run.rotate_logs(max_bytes=20, backups=2) == ["frontend"]
        os.write(fd, b"new")
    finally:
        os.close(fd)
    logs = sorted(p.name for p in run.logs.iterdir())
    assert logs == ["frontend.log", "frontend.log.1", "frontend.log.2"]
    assert run.log_file("frontend").read_bytes() == b"new"
    assert run.logs.joinpath("frontend.log.1").read_text().startswith("gen3")
    assert run.logs.joinpath("frontend.log.2").read_text().startswith("gen2")


def test_a_new_run_keeps_the_previous_runs_logs_up_to_keep_runs(tmp_path):
    run = RunDir.for_graph("gr", tmp_path)
    for started in range(4):
        run.prepare()
        run.log_file("frontend").write_text(f"run {started}\n")
        run.write_state(_status("gr", started_at=1_700_000_000 + started))
        run.archive_previous(keep_runs=2)
    kept = sorted(run.previous.iterdir())
    assert [(p / "logs" / "frontend.log").read_text() for p in kept] == ["run 2\n", "run 3\n"]
    assert not run.logs.exists() and not run.state_file.exists()


def _status(name: str, started_at: float = 0.0) -> GraphStatus:
    return GraphStatus(name=name, namespace=f"dis-serve-{name}", run_dir="/r",
                       endpoint="http://127.0.0.1:1", model_name="m", supervisor_pid=1,
                       supervisor_create_time=1.0, phase=GraphPhase.STOPPED,
                       started_at=started_at, processes=[])


def _mocker_plan(decode_workers: int):
    data = load_model_file(Topology, DEMO_TOPOLOGY).model_dump(mode="json")
    data["pools"]["decode"]["workers"] = decode_workers
    data["hardware"]["nodes"] = decode_workers // 8 + 1  # the mocker's stand-in GPUs
    topo = Topology.model_validate(data)
    return topo, render_launch_plan(topo, RenderContext(run_dir=Path("/run/x")))


def test_a_graph_that_does_not_fit_in_memory_is_refused_with_the_numbers():
    topo, plan = _mocker_plan(4096)
    with pytest.raises(PreflightError) as refused:
        check_memory(plan, topo, available_bytes=16 * 1024**3)
    message = str(refused.value)
    assert message.startswith(f"demo: 4101 processes (4097 mocker workers at about "
                              f"{MOCKER_WORKER_USS_MIB} MiB each) need about ")
    assert "but this machine has 16.0 GiB available" in message
    assert "pools.<role>.workers" in message and "\n" not in message


def test_a_graph_that_fits_in_memory_passes():
    topo, plan = _mocker_plan(1)
    check_memory(plan, topo, available_bytes=16 * 1024**3)
