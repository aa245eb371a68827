"""`security.tls` on Kubernetes, on Dynamo's default platform and on one whose NATS and etcd
require TLS: the frontend serves HTTPS from a Secret, every Dynamo pod serves and calls the
request plane with the pods' certificate under one name, the platform's planes get TLS only
where `kubernetes.tls.planes` says they take it, and the Secrets the pods mount are made by a
rendered object (dis-serve's own Secret manifests, or cert-manager Certificates and Issuers)
unless the user says they exist. Every object passes its project's schema strictly (the DGD's
CRD, cert-manager's CRDs, Kubernetes' own)."""

from __future__ import annotations

import argparse
import base64
import datetime as dt

import jsonschema
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from conftest import GRAPHS, validate_custom_resource, validate_manifest, validate_pod_template
from dis_serve.placements.kubernetes.dump import dump_manifests
from dis_serve.placements.kubernetes.manifests import (
    apply_prerequisites,
    operator_notes,
    render_manifests,
)
from dis_serve.placements.kubernetes.secrets import tls_secret_docs
from dis_serve.placements.kubernetes.tls import request_plane_name
from dis_serve.topology import Topology

EXAMPLES = sorted(p.name for p in GRAPHS.glob("*.yaml"))
ISSUER = {"name": "graph-ca", "kind": "ClusterIssuer"}
GRAPH = "llama70b-h100-disagg-planner.yaml"
NAME = "llama70b-disagg-planner"
PLATFORM_PLANES = ("ETCD_AUTH_CA", "ETCD_AUTH_CLIENT_CERT", "ETCD_AUTH_CLIENT_KEY",
                   "NATS_TLS_CA_CERT_PATH", "NATS_TLS_CLIENT_CERT_PATH",
                   "NATS_TLS_CLIENT_KEY_PATH")
OPERATORS_OWN = ("DYN_DISCOVERY_BACKEND", "ETCD_ENDPOINTS", "NATS_SERVER")


def _topo(graph: str = GRAPH, *, tls: dict | None = None,
          kube_tls: dict | None = None) -> Topology:
    data = yaml.safe_load((GRAPHS / graph).read_text())
    if tls is not None:
        # TLS off needs it said in words on the multi-node examples.
        data["security"] = {"tls": tls, "insecure_network": tls.get("mode") == "off"}
    if kube_tls is not None:
        data.setdefault("kubernetes", {})["tls"] = kube_tls
    return Topology.model_validate(data)


def _docs(graph: str = GRAPH, **settings) -> list[dict]:
    """The manifests as kubectl reads them, with the Secrets `render` adds beside them."""
    topo = _topo(graph, **settings)
    docs = [*render_manifests(topo), *tls_secret_docs(topo, None)]
    return list(yaml.safe_load_all(dump_manifests(docs)))


def _components(docs: list[dict]) -> dict[str, dict]:
    dgd = next(d for d in docs if d["kind"] == "DynamoGraphDeployment")
    return {c["type"]: c for c in dgd["spec"]["components"]}


def _main(component: dict) -> dict:
    return component["podTemplate"]["spec"]["containers"][0]


def _env(component: dict) -> dict[str, dict]:
    return {e["name"]: e for e in _main(component).get("env", [])}


def _volumes(component: dict) -> dict[str, dict]:
    return {v["name"]: v for v in component["podTemplate"]["spec"].get("volumes", [])}


def _mounted_secrets(docs: list[dict]) -> set[str]:
    return {v["secret"]["secretName"] for c in _components(docs).values()
            for v in _volumes(c).values() if "secret" in v}


def _kinds(docs: list[dict], kind: str) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _frontend_config(container: dict):
    from dynamo.frontend.frontend_args import FrontendArgGroup, FrontendConfig

    parser = argparse.ArgumentParser()
    FrontendArgGroup().add_arguments(parser)
    return FrontendConfig.from_cli_args(parser.parse_args(container["args"][2:]))


TLS_PLATFORM = {"planes": True, "certificates": "existing"}
VARIANTS = {"default": {}, "client-certs": {"tls": {"frontend_client_certs": True}},
            "cert-manager": {"kube_tls": {"certificates": "cert-manager"}},
            "issuer": {"kube_tls": {"issuer": ISSUER}},
            "tls-platform": {"kube_tls": TLS_PLATFORM},
            "tls-off": {"tls": {"mode": "off"}}}


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("graph", EXAMPLES)
def test_every_object_passes_its_schema_strictly(graph, variant):
    docs = _docs(graph, **VARIANTS[variant])
    for doc in docs:
        if doc["kind"] in ("DynamoGraphDeployment", "Certificate", "Issuer"):
            validate_custom_resource(doc)
        elif doc["kind"] == "Secret":
            validate_manifest(doc)
    for component in _components(docs).values():
        validate_pod_template(component["podTemplate"])


def test_the_crd_check_is_strict_an_unknown_field_is_refused():
    dgd = next(d for d in _docs() if d["kind"] == "DynamoGraphDeployment")
    dgd["spec"]["components"][0]["tlsSecret"] = "x"
    with pytest.raises(jsonschema.ValidationError, match="tlsSecret"):
        validate_custom_resource(dgd)


@pytest.mark.parametrize("variant", ["default", "cert-manager", "issuer"])
def test_a_rendered_object_makes_every_secret_the_pods_mount(variant):
    docs = _docs(**VARIANTS[variant])
    made = {**_kinds(docs, "Secret"),
            **{c["spec"]["secretName"]: c for c in _kinds(docs, "Certificate").values()}}
    assert _mounted_secrets(docs) == {f"{NAME}-frontend-tls", f"{NAME}-client-tls"}
    assert _mounted_secrets(docs) <= set(made)


def test_the_frontend_serves_https_from_its_mounted_secret():
    frontend = _components(_docs())["frontend"]
    config = _frontend_config(_main(frontend))
    assert str(config.tls_cert_path) == "/etc/dis-serve/tls/frontend/tls.crt"
    assert str(config.tls_key_path) == "/etc/dis-serve/tls/frontend/tls.key"
    assert config.tls_client_ca_cert_path is None
    volume = _volumes(frontend)["frontend-tls"]["secret"]
    assert volume["secretName"] == f"{NAME}-frontend-tls"
    assert {"name": "frontend-tls", "mountPath": "/etc/dis-serve/tls/frontend",
            "readOnly": True} in _main(frontend)["volumeMounts"]


def test_with_client_certificates_the_frontend_asks_for_them_and_probes_itself_with_one():
    frontend = _main(_components(_docs(tls={"frontend_client_certs": True}))["frontend"])
    config = _frontend_config(frontend)
    assert str(config.tls_client_ca_cert_path) == "/etc/dis-serve/tls/frontend/ca.crt"
    # kubelet's HTTPS probe cannot present a certificate: the check runs in the pod.
    command = frontend["readinessProbe"]["exec"]["command"]
    assert command[:2] == ["python3", "-c"]
    assert "/etc/dis-serve/tls/client/tls.crt" in command[2]
    assert "/v1/models/llama-3.1-70b/ready" in command[2]
    compile(command[2], "probe", "exec")


@pytest.mark.parametrize("graph", EXAMPLES)
def test_on_dynamos_default_platform_discovery_nats_and_etcd_are_the_operators(graph):
    for kind, component in _components(_docs(graph)).items():
        env = _env(component)
        assert not set(env) & {*OPERATORS_OWN, *PLATFORM_PLANES}, kind


def test_every_dynamo_pod_serves_and_calls_the_request_plane_with_mutual_tls():
    docs = _docs()
    pods_certificate = f"{NAME}-client-tls"
    for kind, component in _components(docs).items():
        env = {name: e.get("value") for name, e in _env(component).items()}
        client = "/etc/dis-serve/tls/client"
        assert env["DYN_TCP_TLS_CERT_PATH"] == env["DYN_TCP_TLS_CLIENT_CERT_PATH"] == \
            f"{client}/tls.crt", kind
        assert env["DYN_TCP_TLS_KEY_PATH"] == env["DYN_TCP_TLS_CLIENT_KEY_PATH"] == \
            f"{client}/tls.key", kind
        assert env["DYN_TCP_TLS_CA_CERT_PATH"] == env["DYN_TCP_TLS_CLIENT_CA_CERT_PATH"] == \
            f"{client}/ca.crt", kind
        assert env["DYN_TCP_TLS_SERVER_NAME"] == "request-plane.llama70b-disagg-planner.llm" \
                                                 ".dis-serve", kind
        assert _volumes(component)["client-tls"]["secret"] == {
            "secretName": pods_certificate, "defaultMode": 0o440}, kind
    # The one name the callers check is in the certificate the pods hold.
    [secret] = [d for d in docs if d["kind"] == "Secret"
                and d["metadata"]["name"] == pods_certificate]
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert request_plane_name(_topo()) in names.get_values_for_type(x509.DNSName)
    usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH} <= set(usages)


def test_on_a_tls_platform_every_pod_presents_its_certificate_to_etcd_and_nats():
    for kind, component in _components(_docs(kube_tls=TLS_PLATFORM)).items():
        env = _env(component)
        keys = {name: env[name]["valueFrom"]["secretKeyRef"] for name in
                ("ETCD_AUTH_CA", "ETCD_AUTH_CLIENT_CERT", "ETCD_AUTH_CLIENT_KEY")}
        secret = f"{NAME}-client-tls"
        assert keys == {"ETCD_AUTH_CA": {"name": secret, "key": "ca.crt"},
                        "ETCD_AUTH_CLIENT_CERT": {"name": secret, "key": "tls.crt"},
                        "ETCD_AUTH_CLIENT_KEY": {"name": secret, "key": "tls.key"}}, kind
        assert env["NATS_TLS_CLIENT_KEY_PATH"]["value"] == "/etc/dis-serve/tls/client/tls.key"


def test_tls_endpoints_override_the_operators_plain_ones():
    env = {name: e.get("value") for name, e in _env(_components(_docs(kube_tls={
        **TLS_PLATFORM, "etcd_endpoints": "https://etcd.dynamo:2379",
        "nats_server": "tls://nats.dynamo:4222"}))["decode"]).items()}
    assert env["ETCD_ENDPOINTS"] == "https://etcd.dynamo:2379"
    assert env["NATS_SERVER"] == "tls://nats.dynamo:4222"


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("etcd_endpoints", "http://etcd:2379", "https://"),
    ("nats_server", "nats://nats:4222", "tls://")])
def test_a_plain_endpoint_for_tls_planes_is_refused_naming_the_scheme(key, value, fragment):
    with pytest.raises(ValueError, match=f"kubernetes.tls.{key}.*{fragment}"):
        _topo("demo.yaml", kube_tls={**TLS_PLATFORM, key: value})


@pytest.mark.parametrize(("kube_tls", "fragment"), [
    ({"nats_server": "tls://nats:4222"}, "set planes: true"),
    ({"planes": True}, "do not trust"),
    ({"planes": True, "certificates": "cert-manager"}, "do not trust"),
    ({"issuer": ISSUER, "certificates": "secrets"}, "set certificates: cert-manager")])
def test_tls_settings_that_cannot_meet_the_platform_are_refused_with_the_fix(kube_tls, fragment):
    with pytest.raises(ValueError, match=fragment):
        _topo("demo.yaml", kube_tls=kube_tls)


def test_naming_an_issuer_still_means_cert_manager():
    topo = _topo(kube_tls={"issuer": ISSUER})
    assert topo.kubernetes.tls.certificates.value == "cert-manager"


def test_tls_off_renders_plain_http_and_no_secrets():
    docs = _docs(tls={"mode": "off"}, kube_tls={"issuer": ISSUER})
    assert not {"Certificate", "Issuer", "Secret"} & {d["kind"] for d in docs}
    for component in _components(docs).values():
        assert not {"frontend-tls", "client-tls"} & set(_volumes(component))
        assert not any(a.startswith("--tls") for a in _main(component).get("args", []))
        assert not any(name.startswith("DYN_TCP_TLS") for name in _env(component))


def test_cert_manager_bootstraps_the_graphs_own_ca_and_signs_both_secrets_with_it():
    docs = _docs(kube_tls={"certificates": "cert-manager",
                           "frontend_dns_names": ["llm.example.com"]})
    issuers = _kinds(docs, "Issuer")
    certificates = _kinds(docs, "Certificate")
    assert issuers[f"{NAME}-selfsigned"]["spec"] == {"selfSigned": {}}
    ca = certificates[f"{NAME}-ca"]["spec"]
    assert ca["isCA"] and ca["issuerRef"]["name"] == f"{NAME}-selfsigned"
    assert issuers[f"{NAME}-ca"]["spec"] == {"ca": {"secretName": ca["secretName"]}}
    leaves = {c["spec"]["secretName"]: c["spec"] for name, c in certificates.items()
              if name != f"{NAME}-ca"}
    assert set(leaves) == _mounted_secrets(docs)
    assert all(spec["issuerRef"] == {"name": f"{NAME}-ca", "kind": "Issuer",
                                     "group": "cert-manager.io"} for spec in leaves.values())
    frontend = leaves[f"{NAME}-frontend-tls"]
    assert "llama70b-disagg-planner-frontend.llm.svc.cluster.local" in frontend["dnsNames"]
    assert "llm.example.com" in frontend["dnsNames"]
    assert frontend["usages"] == ["digital signature", "server auth"]
    assert frontend["duration"] == "720h"  # security.tls.validity_days (30)
    pods = leaves[f"{NAME}-client-tls"]
    assert pods["usages"] == ["digital signature", "server auth", "client auth"]
    assert request_plane_name(_topo()) in pods["dnsNames"]


def test_an_issuer_the_topology_names_signs_the_certificates_and_none_is_rendered():
    docs = _docs(kube_tls={"issuer": ISSUER})
    assert not _kinds(docs, "Issuer")
    assert {c["spec"]["issuerRef"]["name"] for c in _kinds(docs, "Certificate").values()} == \
        {"graph-ca"}


def test_issuers_and_certificates_are_applied_before_the_dgd_that_mounts_them():
    kinds = [d["kind"] for d in _docs(kube_tls={"certificates": "cert-manager"})]
    assert max(kinds.index("Issuer"), kinds.index("Certificate")) < kinds.index(
        "DynamoGraphDeployment")
    assert kinds.index("Issuer") < kinds.index("Certificate")


def test_existing_secrets_are_the_users_and_the_prerequisites_say_how_to_make_them():
    topo = _topo(kube_tls=TLS_PLATFORM)
    assert not {"Secret", "Certificate"} & {d["kind"] for d in _docs(kube_tls=TLS_PLATFORM)}
    steps = apply_prerequisites(topo)
    assert any(s.startswith(f"kubectl create secret generic {NAME}-frontend-tls ")
               and "--from-file=tls.key=" in s for s in steps)
    assert any(f"{NAME}-client-tls" in s and "etcd and NATS trust" in s for s in steps)
    assert any("must require TLS with client certificates" in n for n in operator_notes(topo))


def test_the_default_notes_say_which_platform_the_pods_are_made_for():
    [note] = [n for n in operator_notes(_topo()) if n.startswith("platform: ")]
    assert "nats.config.nats.tls.enabled: false" in note
    assert "kubernetes.tls.planes: true" in note


def test_the_network_policy_is_the_same_with_tls_as_without():
    def policy(docs):
        return next(d for d in docs if d["kind"] == "NetworkPolicy")

    assert policy(_docs()) == policy(_docs(tls={"mode": "off"}))


def _secrets(docs: list[dict]) -> dict[str, dict[str, bytes]]:
    return {d["metadata"]["name"]: {k: base64.b64decode(v) for k, v in d["data"].items()}
            for d in docs if d["kind"] == "Secret"}


def test_dis_serves_own_secrets_chain_to_their_ca_and_hold_matching_keys():
    for name, data in _secrets(_docs()).items():
        ca = x509.load_pem_x509_certificate(data["ca.crt"])
        cert = x509.load_pem_x509_certificate(data["tls.crt"])
        cert.verify_directly_issued_by(ca)
        key = serialization.load_pem_private_key(data["tls.key"], password=None)
        assert key.public_key() == cert.public_key(), name


def test_rendering_again_keeps_the_secrets_while_they_fit_and_renews_them_before_expiry():
    topo = _topo()
    now = dt.datetime.now(dt.UTC)
    first = dump_manifests(tls_secret_docs(topo, None, now=now))
    again = dump_manifests(tls_secret_docs(topo, first, now=now + dt.timedelta(days=20)))
    assert again == first
    # A quarter of the 30 days left: issued anew, under a new CA.
    late = dump_manifests(tls_secret_docs(topo, first, now=now + dt.timedelta(days=23)))
    assert _secrets(yaml.safe_load_all(late)) != _secrets(yaml.safe_load_all(first))
    renamed = _topo(kube_tls={"frontend_dns_names": ["llm.example.com"]})
    assert dump_manifests(tls_secret_docs(renamed, first, now=now)) != first


def test_tls_planes_without_tls_are_refused():
    with pytest.raises(ValueError, match=r"security\.tls\.mode is off"):
        _topo("demo.yaml", tls={"mode": "off"}, kube_tls=TLS_PLATFORM)
