"""`kubernetes.tls.certificates: secrets` (the default) -> the Secrets the pods mount
(tls.py) as manifests, for clusters without cert-manager: `render` issues the
graph's own CA and a certificate per Secret (security/certs.py) and writes them to
k8s/tls-secrets.yaml, the one file of the rendered directory that holds key material (0600).

Rendering again keeps the certificates the file already holds while they fit the graph (same
names, the same CA, a quarter of their validity left), so re-applying a re-rendered
directory changes no running pod's trust; otherwise everything is issued anew under a new CA,
whose key is never kept. `render_tls_secrets` is pure (PEM in, objects out);
`tls_secret_docs` issues, and `write_tls_secrets` (the placement's `write_inputs`) writes.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from ...topology import CertificateSource, Topology
from .pod import labels
from .tls import tls_on, wanted_certificates

SECRETS_FILE = "k8s/tls-secrets.yaml"


def uses_own_secrets(topo: Topology) -> bool:
    return tls_on(topo) and topo.kubernetes.tls.certificates is CertificateSource.SECRETS


def _b64(pem: bytes) -> str:
    return base64.b64encode(pem).decode()


def render_tls_secrets(topo: Topology, ca_cert: bytes,
                       issued: dict[str, tuple[bytes, bytes]]) -> list[dict[str, Any]]:
    """One kubernetes.io/tls Secret per entry of `issued` (Secret name -> certificate and
    key PEM), each with the CA beside it as cert-manager writes it."""
    return [{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
             "metadata": {"name": name, "namespace": topo.kubernetes.namespace,
                          "labels": labels(topo)},
             "data": {"tls.crt": _b64(cert), "tls.key": _b64(key), "ca.crt": _b64(ca_cert)}}
            for name, (cert, key) in issued.items()]


def _previous(text: str | None) -> tuple[bytes | None, dict[str, tuple[bytes, bytes]]]:
    """The CA and certificates a file rendered earlier holds (nothing if unreadable)."""
    cas, issued = set(), {}
    try:
        docs = [d for d in yaml.safe_load_all(text or "") if isinstance(d, dict)]
        for doc in docs:
            data = {key: base64.b64decode(value) for key, value in doc["data"].items()}
            issued[doc["metadata"]["name"]] = (data["tls.crt"], data["tls.key"])
            cas.add(data["ca.crt"])
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError):
        return None, {}
    return (cas.pop(), issued) if len(cas) == 1 else (None, {})


def tls_secret_docs(topo: Topology, previous: str | None, *,
                    now: dt.datetime | None = None) -> list[dict[str, Any]]:
    """The Secret manifests for `topo`: those `previous` (the file rendered before) holds
    where every one still fits, else new ones under a new CA; none unless the graph uses
    dis-serve's own Secrets."""
    from ...security.certs import certificate_fits, issue_named_certificates

    if not uses_own_secrets(topo):
        return []
    now = now or dt.datetime.now(dt.UTC)
    wanted = {name: names for name, (names, _) in wanted_certificates(topo).items()}
    validity = topo.security.tls.validity_days
    ca_cert, issued = _previous(previous)
    if ca_cert is None or set(issued) != set(wanted) or not all(
            certificate_fits(ca_cert, issued[name][0], names, now=now,
                             days_left=validity / 4) for name, names in wanted.items()):
        ca_cert, issued = issue_named_certificates(topo.name, wanted, now=now,
                                                   validity_days=validity)
    return render_tls_secrets(topo, ca_cert, issued)


def secrets_notes(topo: Topology) -> list[str]:
    """The header of the file: what it holds and how long."""
    days = topo.security.tls.validity_days
    return [f"Private keys: the frontend's and the pods' certificates of graph {topo.name}, "
            "signed by a CA dis-serve made for it at `render` (the CA's key was not kept). "
            "Keep this file as you keep any key (0600); do not commit it.",
            f"They are valid for {days} days (security.tls.validity_days); rendering again "
            "keeps them while a quarter of that is left, then issues new ones: render and "
            "apply again before then, or use kubernetes.tls.certificates: cert-manager, "
            "which renews them itself."]


def write_tls_secrets(topo: Topology, out_dir: Path) -> list[str]:
    """k8s/tls-secrets.yaml under `out_dir`, kept from the last render while it fits."""
    from ...files.private_path import read_own_text
    from ...security.certs import write_private_files
    from .dump import dump_manifests

    path = out_dir / SECRETS_FILE
    try:
        previous = read_own_text(path)
    except OSError:
        previous = None
    text = dump_manifests(tls_secret_docs(topo, previous), secrets_notes(topo),
                          heading="What this file holds:")
    write_private_files(path.parent, {str(path): text.encode()})
    return [f"{path} (the pods' certificates and keys, 0600)"]
