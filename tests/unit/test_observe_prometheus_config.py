"""What `render` writes for Prometheus and Grafana: a scrape target per process labelled with
its pool, dashboard panels over the metrics `top` reads (none deprecated), provisioning that
points Grafana at them."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from dis_serve.observe.frame import DEPRECATED_FAMILIES
from dis_serve.observe.prometheus_config import PANELS, render_observability
from dis_serve.render.launch_plan import RenderContext, render_launch_plan
from dis_serve.topology import Topology
from relocate import relocated_demo


def _files(port: int = 9090) -> dict[str, str]:
    topo = Topology.model_validate(relocated_demo("obs", 19500))
    return render_observability(render_launch_plan(topo, RenderContext(run_dir=Path("/r"))),
                                port)


def test_every_process_with_metrics_is_a_target_labelled_with_its_pool():
    config = yaml.safe_load(_files()["prometheus.yml"])
    (job,) = config["scrape_configs"]
    assert [(t["targets"], t["labels"]["process"], t["labels"]["pool"])
            for t in job["static_configs"]] == [
        (["127.0.0.1:19506"], "frontend", "frontend"),  # its own port, not the balancer's
        (["127.0.0.1:19510"], "prefill-0", "prefill"),
        (["127.0.0.1:19511"], "decode-0", "decode")]


def test_an_https_frontend_is_scraped_with_the_graphs_ca_and_client_certificate():
    data = relocated_demo("obs", 19500)
    data["security"] = {"tls": {"frontend": True, "frontend_client_certs": True}}
    plan = render_launch_plan(Topology.model_validate(data), RenderContext(run_dir=Path("/r")))
    frontend, workers = yaml.safe_load(render_observability(plan, 9090)["prometheus.yml"])[
        "scrape_configs"]
    assert frontend["scheme"] == "https"
    assert frontend["tls_config"] == {"ca_file": "/r/tls/ca.pem", "cert_file": "/r/tls/client.pem",
                                      "key_file": "/r/tls/client-key.pem"}
    assert [t["labels"]["process"] for t in frontend["static_configs"]] == ["frontend"]
    assert "scheme" not in workers
    assert [t["labels"]["process"] for t in workers["static_configs"]] == ["prefill-0",
                                                                          "decode-0"]


def test_the_dashboard_has_a_panel_per_figure_of_top_and_reads_no_deprecated_metric():
    dashboard = json.loads(_files()["grafana/dashboards/dis-serve-obs.json"])
    assert [p["title"] for p in dashboard["panels"]] == [p.title for p in PANELS]
    for title in ("Requests/s", "TTFT", "ITL", "Queued requests", "Active requests",
                  "KV cache use", "KV transfer latency", "Prefix-cache hits", "Workers up"):
        assert title in {p.title for p in PANELS}
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    assert not [name for name in DEPRECATED_FAMILIES if name in exprs]


def test_grafana_provisioning_points_at_the_prometheus_port_and_the_dashboards():
    files = _files(port=19999)
    source = yaml.safe_load(files["grafana/provisioning/datasources/prometheus.yml"])
    assert source["datasources"][0]["url"] == "http://127.0.0.1:19999"
    provider = yaml.safe_load(files["grafana/provisioning/dashboards/dis-serve.yml"])
    assert provider["providers"][0]["options"]["path"] == "grafana/dashboards"
