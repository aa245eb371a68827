"""`kubernetes.tls.certificates: cert-manager` -> the cert-manager objects that fill the
Secrets the pods mount (tls.py): a Certificate per Secret, signed by the issuer the
topology names or, by default, by the graph's own CA, bootstrapped as cert-manager documents
it: a self-signed Issuer signs a CA Certificate, whose Secret backs a CA Issuer that signs
the rest. cert-manager renews each certificate before it expires and writes the CA beside
it (ca.crt). Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...topology import CertificateSource, Topology
from .pod import labels
from .tls import wanted_certificates

API_VERSION = "cert-manager.io/v1"
# The graph's CA outlives its leaves by far, as the platform chart's own webhook root CA
# (87600h, deploy/helm/charts/platform/components/operator/values.yaml): a CA renewal
# re-signs everything.
CA_DURATION = "87600h"
# P-256, as `tls: auto` makes them; PKCS#8 is what every TLS stack reads.
PRIVATE_KEY = {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8"}


def uses_cert_manager(topo: Topology) -> bool:
    return (topo.security.tls.mode.encrypts
            and topo.kubernetes.tls.certificates is CertificateSource.CERT_MANAGER)


def ca_issuer_name(topo: Topology) -> str:
    return f"{topo.name}-ca"


def _meta(topo: Topology, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": topo.kubernetes.namespace, "labels": labels(topo)}


def _issuer(topo: Topology, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Issuer", "metadata": _meta(topo, name),
            "spec": spec}


def _own_ca(topo: Topology) -> list[dict[str, Any]]:
    """The self-signed bootstrap Issuer, the graph's CA Certificate and the CA Issuer."""
    bootstrap = f"{topo.name}-selfsigned"
    ca = {"apiVersion": API_VERSION, "kind": "Certificate",
          "metadata": _meta(topo, ca_issuer_name(topo)),
          "spec": {"isCA": True, "commonName": f"dis-serve CA for {topo.name}",
                   "secretName": ca_issuer_name(topo), "duration": CA_DURATION,
                   "privateKey": {**PRIVATE_KEY, "rotationPolicy": "Never"},
                   "issuerRef": {"name": bootstrap, "kind": "Issuer",
                                 "group": "cert-manager.io"}}}
    return [_issuer(topo, bootstrap, {"selfSigned": {}}), ca,
            _issuer(topo, ca_issuer_name(topo), {"ca": {"secretName": ca_issuer_name(topo)}})]


def _issuer_ref(topo: Topology) -> dict[str, str]:
    issuer = topo.kubernetes.tls.issuer
    if issuer is None:
        return {"name": ca_issuer_name(topo), "kind": "Issuer", "group": "cert-manager.io"}
    return {"name": issuer.name, "kind": issuer.kind, "group": issuer.group}


def render_certificates(topo: Topology) -> list[dict[str, Any]]:
    """The graph's Issuers (unless it names its own) and a Certificate per mounted Secret."""
    if not uses_cert_manager(topo):
        return []
    docs = _own_ca(topo) if topo.kubernetes.tls.issuer is None else []
    duration = f"{24 * topo.security.tls.validity_days}h"
    for secret, (dns_names, request_plane) in wanted_certificates(topo).items():
        usages = ["digital signature", "server auth"]
        if request_plane:
            usages.append("client auth")
        docs.append({"apiVersion": API_VERSION, "kind": "Certificate",
                     "metadata": _meta(topo, secret),
                     "spec": {"secretName": secret, "issuerRef": _issuer_ref(topo),
                              "duration": duration, "commonName": dns_names[0],
                              "dnsNames": dns_names,
                              "privateKey": {**PRIVATE_KEY, "rotationPolicy": "Always"},
                              "usages": usages}})
    return docs
