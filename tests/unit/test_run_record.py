"""The run record: the handle that starts a run writes where it runs (placement, nodes and
their addresses, endpoints, TLS files, job id, engine, versions), and every verb finds the
run's handle by it, not by which files the run directory holds. No processes start here."""

from __future__ import annotations

import time

from conftest import GRAPHS, single_head_topology
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.graph import prepare_run
from dis_serve.launch.run_record import build_record
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.hosts.handle import HostsHandle
from dis_serve.placements.local.handle import LocalHandle
from dis_serve.placements.lookup import doctor_target
from dis_serve.placements.registry import handle_for, handle_for_run
from dis_serve.placements.reports import StartOptions
from dis_serve.placements.slurm.handle import SlurmHandle
from dis_serve.placements.slurm.queue import SlurmJob, read_job
from dis_serve.security.pki_files import pki_paths
from dis_serve.topology import Backend, PlacementKind, ProcessKind, Topology
from relocate import relocated_demo


def _graph(name: str) -> Topology:
    return load_model_file(Topology, GRAPHS / name)


def test_preparing_a_hosts_graph_records_its_nodes_addresses_endpoint_and_tls(tmp_path):
    handle = handle_for(single_head_topology(GRAPHS / "demo-two-hosts.yaml"), tmp_path)
    handle.start(StartOptions())
    record = handle.run.read_record()
    assert record is not None and record == handle.record
    assert (record.placement, record.engine) == (PlacementKind.HOSTS, Backend.MOCKER)
    assert [(n.name, n.address, n.head) for n in record.nodes] == [
        ("head", "127.0.0.2", True), ("workers", "127.0.0.3", False)]
    assert record.nodes[0].services == [ProcessKind.ETCD, ProcessKind.NATS,
                                        ProcessKind.FRONTEND, ProcessKind.BALANCER]
    assert record.endpoints.frontend.endswith("127.0.0.2:8000")
    assert record.endpoints.etcd[0].split("//")[1].startswith("127.0.0.2:")
    assert record.tls.planes == pki_paths(handle.run.path.resolve() / "tls")
    assert record.job_id is None and "dis-serve" in record.versions
    assert record.processes[:3] == ["etcd", "nats", "frontend"]


def test_a_replicated_graphs_record_lists_every_member_and_where_each_service_runs(
        tmp_path):
    handle = handle_for(_graph("demo-two-hosts.yaml"), tmp_path)
    handle.start(StartOptions())
    record = handle.run.read_record()
    assert [n.services for n in record.nodes] == [
        [ProcessKind.ETCD, ProcessKind.NATS, ProcessKind.FRONTEND, ProcessKind.BALANCER],
        [ProcessKind.NATS, ProcessKind.FRONTEND, ProcessKind.BALANCER]]
    assert record.endpoints.etcd == ["https://127.0.0.2:2379"]
    assert record.endpoints.nats == ["tls://127.0.0.2:4222", "tls://127.0.0.3:4222"]
    assert record.endpoints.frontend == "https://127.0.0.2:8000"  # the head's balancer


def test_a_local_up_records_its_placement_before_anything_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))  # the balancer's directory
    topo = Topology.model_validate(relocated_demo("rec-local", 19700))
    prepared = prepare_run(topo, tmp_path)
    try:
        record = prepared.run_dir.read_record()
    finally:
        prepared.release()
    assert record is not None and record.placement is PlacementKind.LOCAL
    assert record.endpoints.frontend == prepared.plan.endpoint
    assert record.processes == [p.name for p in prepared.plan.processes]
    assert [n.address for n in record.nodes] == ["127.0.0.1"]


def test_the_record_decides_the_handle_whatever_files_the_directory_holds(tmp_path):
    topo = _graph("demo-two-hosts.yaml")
    handle = handle_for(topo, tmp_path)
    handle.start(StartOptions())
    run = handle.run
    # A plan.json (what a local run leaves) and an earlier version's Slurm job file.
    run.plan_file.write_text("{}")
    run.slurm_job_file.write_text(SlurmJob(
        name=topo.name, job_id="7", run_dir=str(run.path), model_name="m",
        submitted_at=time.time(), processes=["etcd"]).model_dump_json())
    assert isinstance(handle_for_run(run), HostsHandle)
    run.write_record(build_record(topo, placement=PlacementKind.LOCAL, run_dir=str(run.path),
                                  frontend="http://127.0.0.1:8000", frontend_tls=None,
                                  processes=["etcd"]))
    assert isinstance(handle_for_run(run), LocalHandle)


def test_a_slurm_runs_job_is_the_one_its_record_names(tmp_path):
    topo = _graph("demo-slurm.yaml")
    run = RunDir.for_graph(topo.name, tmp_path)
    run.prepare()
    run.write_record(build_record(topo, placement=PlacementKind.SLURM, run_dir=str(run.path),
                                  frontend="http://${NODE_ADDR_0}:8000", frontend_tls=None,
                                  processes=["etcd", "nats"], job_id="42",
                                  started_at=100.0))
    job = read_job(run)
    assert (job.job_id, job.submitted_at, job.processes) == ("42", 100.0, ["etcd", "nats"])
    handle = handle_for_run(run)
    assert isinstance(handle, SlurmHandle)
    assert handle.process_names()[-1] == "slurm-42"


def test_the_doctor_reads_the_planes_with_the_tls_files_the_record_names(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))  # the balancer's directory
    topo = Topology.model_validate(relocated_demo("rec-doctor", 19720))
    prepared = prepare_run(topo, tmp_path)
    prepared.release()
    run = prepared.run_dir
    assert doctor_target(run).etcd_tls == pki_paths(run.path.resolve() / "tls")
    files = pki_paths(tmp_path / "elsewhere")
    record = run.read_record().model_copy(
        update={"tls": run.read_record().tls.model_copy(update={"planes": files})})
    run.write_record(record)
    assert doctor_target(run).etcd_tls == files
