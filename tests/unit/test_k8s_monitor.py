"""The Kubernetes render's PodMonitors: each selects exactly the pods Dynamo's operator makes
for its components (by the labels the operator puts on them), scrapes a port the component's
pod template names, and labels every series with its graph, pool and pod as the local graph's
targets are labelled. Prometheus's promtool runs the relabelling on pods labelled both ways
operators label prefill and decode pods."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.placements.files import Target, render_files
from dis_serve.placements.kubernetes.manifests import render_dgd
from dis_serve.placements.kubernetes.monitor import render_pod_monitors
from dis_serve.placements.kubernetes.network import GRAPH_LABEL, TYPE_LABEL
from dis_serve.topology import Topology
from dis_serve.yaml_input import load_model_file

EXAMPLES = sorted(p.stem for p in GRAPHS.glob("*.yaml"))
PROMTOOL = shutil.which("promtool")
METRICS_PORT_OWNERS = {"frontend": {"frontend"}, "workers": {"prefill", "decode", "worker"}}


def _topo(graph: str) -> Topology:
    return load_model_file(Topology, GRAPHS / f"{graph}.yaml")


def _operator_labels(topo: Topology, component: dict) -> dict[str, str]:
    """The labels Dynamo's operator gives a component's pods (those the selectors read)."""
    return {GRAPH_LABEL: topo.name, TYPE_LABEL: component["type"],
            "nvidia.com/metrics-enabled": "true"}


def _selects(selector: dict, pod_labels: dict[str, str]) -> bool:
    if any(pod_labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In"
        if pod_labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def _monitors(topo: Topology) -> dict[str, dict]:
    text = render_files(topo, Target.K8S, Path("rendered"))["k8s/podmonitor.yaml"]
    return {m["metadata"]["name"].removeprefix(f"{topo.name}-"): m
            for m in yaml.safe_load_all(text)}


@pytest.mark.parametrize("graph", EXAMPLES)
def test_each_monitor_selects_exactly_the_pods_of_its_components(graph):
    topo = _topo(graph)
    components = render_dgd(topo)["spec"]["components"]
    for suffix, monitor in _monitors(topo).items():
        assert monitor["metadata"]["namespace"] == topo.kubernetes.namespace
        selected = {c["type"] for c in components
                    if _selects(monitor["spec"]["selector"], _operator_labels(topo, c))}
        assert selected == METRICS_PORT_OWNERS[suffix] & {c["type"] for c in components}
        other_graph = {**_operator_labels(topo, components[0]), GRAPH_LABEL: "another"}
        assert not _selects(monitor["spec"]["selector"], other_graph)


@pytest.mark.parametrize("graph", EXAMPLES)
def test_each_monitor_scrapes_a_port_its_components_pod_template_names(graph):
    topo = _topo(graph)
    components = render_dgd(topo)["spec"]["components"]
    for suffix, monitor in _monitors(topo).items():
        (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
        for component in components:
            if component["type"] in METRICS_PORT_OWNERS[suffix]:
                names = {p["name"] for c in component["podTemplate"]["spec"]["containers"]
                         for p in c.get("ports", [])}
                assert endpoint["port"] in names, (component["name"], names)


def _meta(label: str) -> str:
    return "__meta_kubernetes_pod_label_" + label.replace(".", "_").replace("/", "_").replace(
        "-", "_")


def _as_prometheus(relabeling: dict) -> dict:
    """The Prometheus relabel_config the Prometheus Operator generates from a relabeling."""
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return {keys.get(k, k): v for k, v in relabeling.items()}


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
def test_relabelling_names_graph_pool_and_pod_for_both_ways_operators_label_workers(tmp_path):
    topo = _topo("demo")
    (endpoint,) = render_pod_monitors(topo)[1]["spec"]["podMetricsEndpoints"]
    pods = [  # (pod name, component type, sub-type): the labels as discovery reports them
        ("demo-prefill-0", "prefill", ""), ("demo-decode-0", "worker", "decode"),
        ("demo-worker-0", "worker", "")]
    (tmp_path / "pods.json").write_text(json.dumps([
        {"targets": [f"10.0.0.{i}:9090"],
         "labels": {"__meta_kubernetes_pod_name": name, _meta(GRAPH_LABEL): "demo",
                    _meta(TYPE_LABEL): kind,
                    _meta("nvidia.com/dynamo-sub-component-type"): sub}}
        for i, (name, kind, sub) in enumerate(pods)]))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [{
        "job_name": "pods", "file_sd_configs": [{"files": ["pods.json"]}],
        "relabel_configs": [_as_prometheus(r) for r in endpoint["relabelings"]]}]}))
    result = subprocess.run([PROMTOOL, "check", "service-discovery", "--timeout=1s",
                             str(tmp_path / "prometheus.yml"), "pods"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert sorted((t["labels"]["process"], t["labels"]["pool"], t["labels"]["graph"])
                  for t in json.loads(result.stdout)) == [
        ("demo-decode-0", "decode", "demo"), ("demo-prefill-0", "prefill", "demo"),
        ("demo-worker-0", "agg", "demo")]


def test_an_https_frontend_is_scraped_with_its_secrets_ca_under_its_service_name():
    topo = _topo("llama70b-h100-disagg")
    (frontend,) = _monitors(topo)["frontend"]["spec"]["podMetricsEndpoints"]
    assert frontend["scheme"] == "https"
    assert frontend["tlsConfig"] == {
        "ca": {"secret": {"name": "llama70b-disagg-frontend-tls", "key": "ca.crt"}},
        "serverName": "llama70b-disagg-frontend"}
    (workers,) = _monitors(topo)["workers"]["spec"]["podMetricsEndpoints"]
    assert "scheme" not in workers and "tlsConfig" not in workers


def test_a_frontend_asking_for_client_certificates_is_scraped_with_the_pods_one():
    data = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())
    data["security"] = {"tls": {"frontend_client_certs": True}}
    (frontend,) = render_pod_monitors(Topology.model_validate(data))[0]["spec"][
        "podMetricsEndpoints"]
    assert frontend["tlsConfig"]["cert"] == {
        "secret": {"name": "llama70b-disagg-client-tls", "key": "tls.crt"}}
    assert frontend["tlsConfig"]["keySecret"] == {"name": "llama70b-disagg-client-tls",
                                                  "key": "tls.key"}
