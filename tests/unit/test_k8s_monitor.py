"""The Kubernetes render's PodMonitors: each selects exactly the pods Dynamo's operator makes
for its components (by the labels the operator puts on them), scrapes a port the component's
pod template names, labels every series as the platform chart's own monitors do (the
dynamo_namespace Dynamo's planner filters by) and with its graph, pool and pod as the local
graph's targets are labelled, and, with the platform chart's PodMonitors beside them, is the
only scraper of each port. Prometheus's promtool runs the relabelling on pods labelled both
ways operators label prefill and decode pods."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import GRAPHS, K8S_FIXTURES, validate_custom_resource
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.files import Target, render_files
from dis_serve.placements.kubernetes.manifests import render_dgd
from dis_serve.placements.kubernetes.monitor import pod_monitor_file, render_pod_monitors
from dis_serve.placements.kubernetes.network import GRAPH_LABEL, TYPE_LABEL
from dis_serve.placements.kubernetes.pod import dynamo_namespace
from dis_serve.topology import Topology

EXAMPLES = sorted(p.stem for p in GRAPHS.glob("*.yaml"))
PROMTOOL = shutil.which("promtool")
METRICS_PORT_OWNERS = {"frontend": {"frontend"}, "workers": {"prefill", "decode", "worker"}}


def _topo(graph: str) -> Topology:
    return load_model_file(Topology, GRAPHS / f"{graph}.yaml")


def _operator_labels(topo: Topology, component: dict) -> dict[str, str]:
    """The labels Dynamo's operator gives a component's pods (those the selectors read):
    nvidia.com/metrics-enabled only where neither the DGD nor the pod template says
    nvidia.com/enable-metrics: "false" (KubeAnnotationEnableMetrics)."""
    labels = {GRAPH_LABEL: topo.name, TYPE_LABEL: component["type"],
              "nvidia.com/dynamo-namespace": dynamo_namespace(topo)}
    annotations = component["podTemplate"].get("metadata", {}).get("annotations", {})
    if annotations.get("nvidia.com/enable-metrics") != "false":
        labels["nvidia.com/metrics-enabled"] = "true"
    return labels


def _selects(selector: dict, pod_labels: dict[str, str]) -> bool:
    if any(pod_labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expr in selector.get("matchExpressions", []):
        assert expr["operator"] == "In"
        if pod_labels.get(expr["key"]) not in expr["values"]:
            return False
    return True


def _monitors(topo: Topology) -> dict[str, dict]:
    text = render_files(topo, Target.K8S, Path("rendered"))[pod_monitor_file(topo)]
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


def _platform_monitors() -> list[dict]:
    text = (K8S_FIXTURES / "dynamo-platform-podmonitors.yaml").read_text()
    return [m for m in yaml.safe_load_all(text) if m]


def _scrapers(monitors: list[dict], pod_labels: dict[str, str], ports: set[str]) -> list[str]:
    """(monitor, port) of every endpoint that scrapes a pod with these labels and ports."""
    return [f"{m['metadata']['name']}:{e.get('port')}" for m in monitors
            if _selects(m["spec"]["selector"], pod_labels)
            for e in m["spec"]["podMetricsEndpoints"] if e.get("port") in ports]


def _ports(component: dict) -> set[str]:
    return {p["name"] for c in component["podTemplate"]["spec"]["containers"]
            for p in c.get("ports", [])}


@pytest.mark.parametrize("graph", EXAMPLES)
def test_with_the_platforms_monitors_beside_them_each_port_has_one_scraper(graph):
    topo = _topo(graph)
    ours = list(_monitors(topo).values())
    for component in render_dgd(topo)["spec"]["components"]:
        labels, ports = _operator_labels(topo, component), _ports(component)
        scrapers = _scrapers([*_platform_monitors(), *ours], labels, ports)
        assert len(scrapers) == len(ports), (component["name"], scrapers)
        assert all(s.startswith(f"{topo.name}-") for s in scrapers), scrapers


def test_without_the_opt_out_the_platforms_monitors_would_scrape_the_https_frontend_in_clear():
    topo = _topo("llama70b-h100-disagg")
    frontend = render_dgd(topo)["spec"]["components"][0]
    del frontend["podTemplate"]["metadata"]
    assert _scrapers(_platform_monitors(), _operator_labels(topo, frontend),
                     _ports(frontend)) == ["dynamo-frontend:http"]


def test_the_planner_graph_carries_its_monitors_in_the_applied_directory():
    assert pod_monitor_file(_topo("llama70b-h100-disagg-planner")) == "k8s/podmonitor.yaml"
    assert pod_monitor_file(_topo("llama70b-h100-disagg")) == "k8s/monitoring/podmonitor.yaml"


@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_monitor_passes_the_prometheus_operators_crd_strictly(graph):
    for monitor in _monitors(_topo(graph)).values():
        validate_custom_resource(monitor)


@pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed")
def test_the_frontends_series_carry_the_dynamo_namespace_the_planner_filters_by(tmp_path):
    topo = _topo("llama70b-h100-disagg-planner")
    (endpoint,) = _monitors(topo)["frontend"]["spec"]["podMetricsEndpoints"]
    frontend = render_dgd(topo)["spec"]["components"][0]
    discovered = {"__meta_kubernetes_pod_name": "planner-graph-frontend-0",
                  **{_meta(k): v for k, v in _operator_labels(topo, frontend).items()}}
    (tmp_path / "pods.json").write_text(json.dumps([{"targets": ["10.0.0.9:8000"],
                                                     "labels": discovered}]))
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump({"scrape_configs": [{
        "job_name": "pods", "file_sd_configs": [{"files": ["pods.json"]}],
        "relabel_configs": [_as_prometheus(r) for r in endpoint["relabelings"]]}]}))
    result = subprocess.run([PROMTOOL, "check", "service-discovery", "--timeout=1s",
                             str(tmp_path / "prometheus.yml"), "pods"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    [target] = json.loads(result.stdout)
    # The planner's PrometheusAPIClient keeps series whose dynamo_namespace is its own
    # DYN_NAMESPACE, which the operator sets to NAMESPACE-NAME.
    assert target["labels"]["dynamo_namespace"] == "llm-llama70b-disagg-planner"
    assert target["labels"]["pool"] == "frontend"
    assert endpoint["honorLabels"] is True
