"""Prometheus for graphs across nodes (hosts, Slurm): `render` writes a prometheus.yml that
discovers its targets from files, and the targets of each node come from the addresses the
graph resolved when it started, labelled like the local graph's. Prometheus's own promtool
checks the config and reads the target files back."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import GRAPHS, single_head_topology
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.observe.cluster_targets import (
    dump_targets,
    graph_targets,
    node_targets,
    render_cluster_observability,
)
from dis_serve.placements.hosts.scripts import render_hosts_plan
from dis_serve.placements.slurm.sbatch import render_slurm_plan
from dis_serve.topology import Topology

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
MULTI_NODE = ["demo-two-hosts", "demo-slurm", "demo-3node-slurm", "llama70b-h100-disagg"]
# What a two-node Slurm job writes to its `addresses` file.
SLURM_ADDRESSES = {"NODE_ADDR_0": "198.18.0.11", "NODE_ADDR_1": "198.18.0.12"}


def _topo(graph: str) -> Topology:
    return load_model_file(Topology, GRAPHS / f"{graph}.yaml")


def _single_head(graph: str) -> Topology:
    """The graph with one frontend, on the head (the replicas' targets: test below)."""
    return single_head_topology(GRAPHS / f"{graph}.yaml")


def _write(directory: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_text(text)
    return directory / "prometheus.yml"


def _promtool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=60,
                          check=False)


def test_each_slurm_node_lists_its_processes_at_the_address_the_job_resolved():
    plan = render_slurm_plan(_single_head("demo-two-hosts"))
    files = graph_targets(plan, SLURM_ADDRESSES)
    assert {path: [(t["targets"], t["labels"]["process"], t["labels"]["pool"],
                    t["labels"]["node"]) for t in targets]
            for path, targets in files.items()} == {
        "targets/head.json": [(["198.18.0.11:8001"], "frontend", "frontend", "head")],
        "targets/workers.json": [(["198.18.0.12:9100"], "prefill-0", "prefill", "workers"),
                                 (["198.18.0.12:9101"], "decode-0", "decode", "workers")]}


def test_a_hosts_node_with_a_literal_address_needs_no_resolved_values():
    plan = render_hosts_plan(_single_head("demo-two-hosts"))
    (worker,) = [n for n in plan.nodes if not n.head]
    assert [t["targets"] for t in node_targets(plan, worker.index, {})] == [
        ["127.0.0.3:9100"], ["127.0.0.3:9101"]]


def test_a_node_whose_address_is_not_resolved_yet_is_refused_naming_the_variable():
    plan = render_slurm_plan(_topo("demo-two-hosts"))
    with pytest.raises(ValueError, match="node workers: the address NODE_ADDR_1"):
        node_targets(plan, 1, {"NODE_ADDR_0": "198.18.0.11"})


def test_the_cluster_config_discovers_targets_from_files_beside_it_and_names_no_address():
    files = render_cluster_observability(render_slurm_plan(_topo("demo-two-hosts")))
    (job,) = yaml.safe_load(files["prometheus.yml"])["scrape_configs"]
    assert job["file_sd_configs"][0]["files"] == ["targets/*.json"]
    assert "static_configs" not in job
    assert "grafana/dashboards/dis-serve-demo-two-hosts.json" in files


@needs_promtool
@pytest.mark.parametrize("graph", MULTI_NODE)
@pytest.mark.parametrize("render_plan", [render_hosts_plan, render_slurm_plan],
                         ids=["hosts", "slurm"])
def test_promtool_accepts_the_rendered_cluster_config(graph, render_plan, tmp_path):
    config = _write(tmp_path, render_cluster_observability(render_plan(_topo(graph))))
    result = _promtool("check", "config", str(config))
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_prometheus_discovers_every_written_target_with_its_labels(tmp_path):
    plan = render_slurm_plan(_single_head("demo-two-hosts"))
    files = render_cluster_observability(plan)
    files |= {path: dump_targets(t) for path, t in graph_targets(plan, SLURM_ADDRESSES).items()}
    config = _write(tmp_path, files)
    result = _promtool("check", "service-discovery", "--timeout=1s", str(config),
                       "dis-serve-demo-two-hosts")
    assert result.returncode == 0, result.stderr
    found = {(t["labels"]["instance"], t["labels"]["pool"], t["labels"]["node"])
             for t in json.loads(result.stdout)}
    assert found == {("198.18.0.11:8001", "frontend", "head"),
                     ("198.18.0.12:9100", "prefill", "workers"),
                     ("198.18.0.12:9101", "decode", "workers")}


def test_each_frontend_replica_is_scraped_at_its_own_address_not_the_balancers():
    plan = render_slurm_plan(_topo("demo-two-hosts"))
    files = graph_targets(plan, SLURM_ADDRESSES)
    frontends = [(t["targets"], t["labels"]["process"]) for targets in files.values()
                 for t in targets if t["labels"]["pool"] == "frontend"]
    assert frontends == [(["198.18.0.11:8001"], "frontend-0"),
                         (["198.18.0.12:8002"], "frontend-1")]


def test_render_writes_the_file_discovery_config_beside_the_hosts_and_slurm_scripts(
        run_cli, tmp_path):
    assert run_cli("render", GRAPHS / "demo-two-hosts.yaml", "--out", tmp_path).exit_code == 0
    for target in ("hosts", "slurm"):
        config = yaml.safe_load((tmp_path / target / "observability/prometheus.yml")
                                .read_text())
        assert config["scrape_configs"][0]["file_sd_configs"][0]["files"] == ["targets/*.json"]


@needs_promtool
def test_an_https_frontend_is_scraped_over_https_with_the_graphs_ca_and_workers_over_http(
        tmp_path):
    plan = render_slurm_plan(_topo("demo-two-hosts"))
    files = render_cluster_observability(plan)
    files |= {path: dump_targets(t) for path, t in graph_targets(plan, SLURM_ADDRESSES).items()}
    (job,) = yaml.safe_load(files["prometheus.yml"])["scrape_configs"]
    assert job["tls_config"] == {"ca_file": "../tls/ca.pem"}  # beside observability/
    result = _promtool("check", "service-discovery", "--timeout=1s",
                       str(_write(tmp_path, files)), "dis-serve-demo-two-hosts")
    schemes = {t["labels"]["pool"]: t["labels"].get("__scheme__", "http")
               for t in json.loads(result.stdout)}
    assert schemes == {"frontend": "https", "prefill": "http", "decode": "http"}
