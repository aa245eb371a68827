"""`security.tls` on Kubernetes: the frontend serves HTTPS from a Secret, the frontend,
workers and planner present a client certificate from another to the platform's etcd and
NATS, cert-manager Certificates fill both when the topology names an issuer, and every
object passes its project's schema strictly (the DGD's CRD, cert-manager's CRD,
Kubernetes' own)."""

from __future__ import annotations

import argparse

import jsonschema
import pytest
import yaml

from conftest import GRAPHS, validate_custom_resource, validate_pod_template
from dis_serve.placements.kubernetes.dump import dump_manifests
from dis_serve.placements.kubernetes.manifests import (
    apply_prerequisites,
    operator_notes,
    render_manifests,
)
from dis_serve.topology import Topology

EXAMPLES = sorted(p.name for p in GRAPHS.glob("*.yaml"))
ISSUER = {"name": "graph-ca", "kind": "ClusterIssuer"}


def _docs(graph: str = "llama70b-h100-disagg-planner.yaml", *, tls: dict | None = None,
          kube_tls: dict | None = None) -> list[dict]:
    data = yaml.safe_load((GRAPHS / graph).read_text())
    if tls is not None:
        # TLS off needs it said in words on the multi-node examples.
        data["security"] = {"tls": tls, "insecure_network": tls.get("mode") == "off"}
    if kube_tls is not None:
        data.setdefault("kubernetes", {})["tls"] = kube_tls
    return list(yaml.safe_load_all(dump_manifests(render_manifests(Topology.model_validate(
        data)))))


def _components(docs: list[dict]) -> dict[str, dict]:
    dgd = next(d for d in docs if d["kind"] == "DynamoGraphDeployment")
    return {c["type"]: c for c in dgd["spec"]["components"]}


def _main(component: dict) -> dict:
    return component["podTemplate"]["spec"]["containers"][0]


def _volumes(component: dict) -> dict[str, dict]:
    return {v["name"]: v for v in component["podTemplate"]["spec"].get("volumes", [])}


def _frontend_config(container: dict):
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    return FrontendConfig.from_cli_args(parser.parse_args(container["args"][2:]))


VARIANTS = {"default": {}, "client-certs": {"tls": {"frontend_client_certs": True}},
            "issuer": {"kube_tls": {"issuer": ISSUER}},
            "tls-off": {"tls": {"mode": "off"}}}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_dgd_and_certificate_passes_its_crd_strictly(graph, variant):
    docs = _docs(graph, **VARIANTS[variant])
    custom = [d for d in docs if d["kind"] in ("DynamoGraphDeployment", "Certificate")]
    for doc in custom:
        validate_custom_resource(doc)
    for component in _components(docs).values():
        validate_pod_template(component["podTemplate"])


def test_the_crd_check_is_strict_an_unknown_field_is_refused():
    dgd = next(d for d in _docs() if d["kind"] == "DynamoGraphDeployment")
    dgd["spec"]["components"][0]["tlsSecret"] = "x"
    with pytest.raises(jsonschema.ValidationError, match="tlsSecret"):
        validate_custom_resource(dgd)


def test_the_frontend_serves_https_from_its_mounted_secret():
    frontend = _components(_docs())["frontend"]
    config = _frontend_config(_main(frontend))
    assert str(config.tls_cert_path) == "/etc/dis-serve/tls/frontend/tls.crt"
    assert str(config.tls_key_path) == "/etc/dis-serve/tls/frontend/tls.key"
    assert config.tls_client_ca_cert_path is None
    volume = _volumes(frontend)["frontend-tls"]["secret"]
    assert volume["secretName"] == "llama70b-disagg-planner-frontend-tls"
    assert {"name": "frontend-tls", "mountPath": "/etc/dis-serve/tls/frontend",
            "readOnly": True} in _main(frontend)["volumeMounts"]


def test_with_client_certificates_the_frontend_asks_for_them_and_probes_itself_with_one():
    frontend = _main(_components(_docs(tls={"frontend_client_certs": True}))["frontend"])
    config = _frontend_config(frontend)
    assert str(config.tls_client_ca_cert_path) == "/etc/dis-serve/tls/frontend/ca.crt"
    # kubelet's HTTPS probe cannot present a certificate: the check runs in the pod.
    command = frontend["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    assert "/etc/dis-serve/tls/client/tls.crt" in command[2] and "/health" in command[2]
    compile(command[2], "probe", "exec")


def test_every_dynamo_pod_presents_the_client_certificate_to_etcd_and_nats():
    for kind, component in _components(_docs()).items():
        env = {e["name"]: e for e in _main(component)["env"]}
        keys = {name: env[name]["valueFrom"]["secretKeyRef"] for name in
                ("ETCD_AUTH_CA", "ETCD_AUTH_CLIENT_CERT", "ETCD_AUTH_CLIENT_KEY")}
        assert keys == {"ETCD_AUTH_CA": {"name": "llama70b-disagg-planner-client-tls",
                                         "key": "ca.crt"},
                        "ETCD_AUTH_CLIENT_CERT": {"name": "llama70b-disagg-planner-client-tls",
                                                  "key": "tls.crt"},
                        "ETCD_AUTH_CLIENT_KEY": {"name": "llama70b-disagg-planner-client-tls",
                                                 "key": "tls.key"}}, kind
        assert env["NATS_TLS_CLIENT_KEY_PATH"]["value"] == "/etc/dis-serve/tls/client/tls.key"
        volume = _volumes(component)["client-tls"]["secret"]
        assert volume == {"secretName": "llama70b-disagg-planner-client-tls",
                          "defaultMode": 0o440}, kind


def test_a_platform_without_tls_planes_gets_no_client_certificate():
    components = _components(_docs(kube_tls={"planes": False}))
    for component in components.values():
        names = {e["name"] for e in _main(component).get("env", [])}
        assert not names & {"ETCD_AUTH_CA", "NATS_TLS_CA_CERT_PATH"}
        assert "client-tls" not in _volumes(component)
    assert "frontend-tls" in _volumes(components["frontend"])


def test_tls_endpoints_override_the_operators_plain_ones():
    env = {e["name"]: e.get("value") for e in _main(_components(_docs(kube_tls={
        "etcd_endpoints": "https://etcd.dynamo:2379", "nats_server": "tls://nats.dynamo:4222"}))[
        "decode"])["env"]}
    assert env["ETCD_ENDPOINTS"] == "https://etcd.dynamo:2379"
    assert env["NATS_SERVER"] == "tls://nats.dynamo:4222"


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("etcd_endpoints", "http://etcd:2379", "https://"),
    ("nats_server", "nats://nats:4222", "tls://")])
def test_a_plain_endpoint_for_tls_planes_is_refused_naming_the_scheme(key, value, fragment):
    data = yaml.safe_load((GRAPHS / "demo.yaml").read_text())
    data["kubernetes"] = {"tls": {key: value}}
    with pytest.raises(ValueError, match=f"kubernetes.tls.{key}.*{fragment}"):
        Topology.model_validate(data)


def test_tls_off_renders_plain_http_and_no_secrets():
    docs = _docs(tls={"mode": "off"}, kube_tls={"issuer": ISSUER})
    assert not any(d["kind"] == "Certificate" for d in docs)
    for component in _components(docs).values():
        assert not {"frontend-tls", "client-tls"} & set(_volumes(component))
        assert not any(a.startswith("--tls") for a in _main(component).get("args", []))


def test_cert_manager_certificates_fill_the_secrets_the_pods_mount():
    docs = _docs(kube_tls={"issuer": ISSUER, "frontend_dns_names": ["llm.example.com"]})
    certificates = {d["spec"]["secretName"]: d["spec"] for d in docs
                    if d["kind"] == "Certificate"}
    mounted = {v["secret"]["secretName"] for c in _components(docs).values()
               for v in _volumes(c).values() if "secret" in v}
    assert set(certificates) == mounted
    frontend = certificates["llama70b-disagg-planner-frontend-tls"]
    assert frontend["issuerRef"] == {**ISSUER, "group": "cert-manager.io"}
    assert "llama70b-disagg-planner-frontend.llm.svc.cluster.local" in frontend["dnsNames"]
    assert "llm.example.com" in frontend["dnsNames"]
    assert frontend["usages"] == ["digital signature", "server auth"]
    assert frontend["duration"] == "720h"  # security.tls.validity_days (30)
    assert certificates["llama70b-disagg-planner-client-tls"]["usages"] == [
        "digital signature", "client auth"]


def test_certificates_are_applied_before_the_dgd_that_mounts_them():
    kinds = [d["kind"] for d in _docs(kube_tls={"issuer": ISSUER})]
    assert kinds.index("Certificate") < kinds.index("DynamoGraphDeployment")


def test_without_an_issuer_the_prerequisites_say_how_to_make_the_secrets():
    topo = Topology.model_validate(yaml.safe_load(
        (GRAPHS / "llama70b-h100-disagg.yaml").read_text()))
    steps = apply_prerequisites(topo)
    assert any(s.startswith("kubectl create secret generic llama70b-disagg-frontend-tls ")
               and "--from-file=tls.key=" in s for s in steps)
    assert any("llama70b-disagg-client-tls" in s for s in steps)
    assert any("etcd and NATS: every pod presents" in n for n in operator_notes(topo))


def test_the_network_policy_is_the_same_with_tls_as_without():
    def policy(docs):
        return next(d for d in docs if d["kind"] == "NetworkPolicy")

    assert policy(_docs()) == policy(_docs(tls={"mode": "off"}))
