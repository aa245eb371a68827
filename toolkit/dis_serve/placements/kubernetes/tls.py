"""`security.tls` on Kubernetes: the frontend's HTTPS from a Secret, the client certificate
the frontend, workers and planner present to the platform's etcd and NATS from another,
and cert-manager `Certificate` objects that fill both for those who run it.

Secrets hold `tls.crt`, `tls.key` and `ca.crt` (what cert-manager writes, and `kubectl
create secret generic --from-file` makes by hand). Dynamo 1.6.1 reads etcd's client
credentials as PEM text (ETCD_AUTH_*: render/tls_planes.py), so those come from the Secret's
keys as environment values; NATS and the frontend read paths, so the Secrets are also
mounted read-only. Nothing here holds key material. Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...render.tls_planes import ETCD_CLIENT_PEM_ENV
from ...security.pki_files import FrontendTlsFiles
from ...topology import Topology
from .pod import labels

FRONTEND_TLS_MOUNT = "/etc/dis-serve/tls/frontend"
CLIENT_TLS_MOUNT = "/etc/dis-serve/tls/client"
# The Secret's key for each PkiPaths-style role.
SECRET_KEYS = {"ca_cert": "ca.crt", "client_cert": "tls.crt", "client_key": "tls.key"}
PROBE_TIMEOUT_S = 5


def frontend_https(topo: Topology) -> bool:
    """In a cluster the frontend always serves a Service, i.e. the network."""
    return topo.security.frontend_tls(off_loopback=True)


def planes_tls(topo: Topology) -> bool:
    return topo.security.tls.mode.encrypts and topo.kubernetes.tls.planes


def frontend_secret(topo: Topology) -> str:
    return topo.kubernetes.tls.frontend_secret or f"{topo.name}-frontend-tls"


def client_secret(topo: Topology) -> str:
    return topo.kubernetes.tls.client_secret or f"{topo.name}-client-tls"


def frontend_tls_files(topo: Topology) -> FrontendTlsFiles | None:
    """The frontend's `--tls-*` files, where its Secret is mounted."""
    if not frontend_https(topo):
        return None
    client_ca = (f"{FRONTEND_TLS_MOUNT}/ca.crt" if topo.security.tls.frontend_client_certs
                 else None)
    return FrontendTlsFiles(cert=f"{FRONTEND_TLS_MOUNT}/tls.crt",
                            key=f"{FRONTEND_TLS_MOUNT}/tls.key", client_ca=client_ca)


def _secret_volume(name: str, secret: str) -> dict[str, Any]:
    # 0440 with the pod's fsGroup: the non-root container user reads it, nobody else.
    return {"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}}


def _mount(name: str, path: str) -> dict[str, Any]:
    return {"name": name, "mountPath": path, "readOnly": True}


def frontend_needs_client_cert(topo: Topology) -> bool:
    """The frontend holds the client certificate: for the planes, and for probing itself
    when it asks its clients for one."""
    return planes_tls(topo) or (frontend_https(topo)
                                and topo.security.tls.frontend_client_certs)


def tls_volumes(topo: Topology, *, frontend: bool) -> tuple[list[dict], list[dict]]:
    """(volumeMounts, volumes) of a pod: the client Secret where the pod needs it, and on the
    frontend its serving Secret."""
    mounts, volumes = [], []
    if frontend and frontend_https(topo):
        mounts.append(_mount("frontend-tls", FRONTEND_TLS_MOUNT))
        volumes.append(_secret_volume("frontend-tls", frontend_secret(topo)))
    if frontend_needs_client_cert(topo) if frontend else planes_tls(topo):
        mounts.append(_mount("client-tls", CLIENT_TLS_MOUNT))
        volumes.append(_secret_volume("client-tls", client_secret(topo)))
    return mounts, volumes


def planes_env(topo: Topology) -> list[dict[str, Any]]:
    """The environment every Dynamo pod needs for the platform's etcd and NATS over TLS."""
    if not planes_tls(topo):
        return []
    secret = client_secret(topo)
    env: list[dict[str, Any]] = [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": secret,
                                                      "key": SECRET_KEYS[role]}}}
        for name, role in ETCD_CLIENT_PEM_ENV.items()]
    env += [{"name": "NATS_TLS_CA_CERT_PATH", "value": f"{CLIENT_TLS_MOUNT}/ca.crt"},
            {"name": "NATS_TLS_CLIENT_CERT_PATH", "value": f"{CLIENT_TLS_MOUNT}/tls.crt"},
            {"name": "NATS_TLS_CLIENT_KEY_PATH", "value": f"{CLIENT_TLS_MOUNT}/tls.key"}]
    kube = topo.kubernetes.tls
    if kube.etcd_endpoints:
        env.append({"name": "ETCD_ENDPOINTS", "value": kube.etcd_endpoints})
    if kube.nats_server:
        env.append({"name": "NATS_SERVER", "value": kube.nats_server})
    return env


def _health_check(path: str, port: int) -> list[str]:
    # kubelet's HTTPS probes present no client certificate: a frontend that asks for one is
    # probed from inside its pod, with the graph's client certificate and CA (the name is
    # not checked: the probe calls 127.0.0.1, the chain is).
    code = ("import ssl,sys,urllib.request as r\n"
            f"c=ssl.create_default_context(cafile='{FRONTEND_TLS_MOUNT}/ca.crt')\n"
            "c.check_hostname=False\n"
            f"c.load_cert_chain('{CLIENT_TLS_MOUNT}/tls.crt','{CLIENT_TLS_MOUNT}/tls.key')\n"
            f"r.urlopen('https://127.0.0.1:{port}{path}',context=c,timeout={PROBE_TIMEOUT_S})")
    return ["python3", "-c", code]


def frontend_probe_action(topo: Topology, path: str, port: int,
                          port_name: str) -> dict[str, Any]:
    """How kubelet asks the frontend for `path`: plain HTTP, HTTPS (kubelet does not check
    the certificate), or, with client certificates on, a check run in the pod that presents
    one."""
    if not frontend_https(topo):
        return {"httpGet": {"path": path, "port": port_name}}
    if not topo.security.tls.frontend_client_certs:
        return {"httpGet": {"path": path, "port": port_name, "scheme": "HTTPS"}}
    return {"exec": {"command": _health_check(path, port)}}


def render_certificates(topo: Topology) -> list[dict[str, Any]]:
    """cert-manager Certificates for the Secrets above, when the topology names an issuer."""
    kube = topo.kubernetes
    issuer = kube.tls.issuer
    if issuer is None or not topo.security.tls.mode.encrypts:
        return []
    ref = {"name": issuer.name, "kind": issuer.kind, "group": issuer.group}
    duration = f"{24 * topo.security.tls.validity_days}h"
    docs = []
    if frontend_https(topo):
        docs.append(_certificate(topo, frontend_secret(topo), ref, duration,
                                 dns_names=frontend_dns_names(topo),
                                 usages=["digital signature", "server auth"]))
    if frontend_needs_client_cert(topo):
        docs.append(_certificate(topo, client_secret(topo), ref, duration,
                                 dns_names=[f"client.{topo.name}.dis-serve"],
                                 usages=["digital signature", "client auth"]))
    return docs


def frontend_dns_names(topo: Topology) -> list[str]:
    """The operator's Service for the frontend (NAME-frontend), the public one when asked,
    each in its short and cluster forms, and the topology's own names."""
    namespace = topo.kubernetes.namespace
    services = [f"{topo.name}-frontend"]
    if topo.kubernetes.service.service_type is not None:
        services.append(f"{topo.name}-public")
    names = [form for service in services for form in (
        service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local")]
    return list(dict.fromkeys([*names, *topo.kubernetes.tls.frontend_dns_names]))


def _certificate(topo: Topology, secret: str, issuer: dict[str, str], duration: str, *,
                 dns_names: list[str], usages: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
        "metadata": {"name": secret, "namespace": topo.kubernetes.namespace,
                     "labels": labels(topo)},
        "spec": {"secretName": secret, "issuerRef": issuer, "duration": duration,
                 "commonName": dns_names[0], "dnsNames": dns_names,
                 # P-256, as `tls: auto` makes them; PKCS#8 is what every TLS stack reads.
                 "privateKey": {"algorithm": "ECDSA", "size": 256, "encoding": "PKCS8",
                                "rotationPolicy": "Always"},
                 "usages": usages},
    }


def secret_commands(topo: Topology) -> list[str]:
    """`kubectl` lines that make the Secrets by hand (no issuer)."""
    if topo.kubernetes.tls.issuer is not None or not topo.security.tls.mode.encrypts:
        return []
    namespace = topo.kubernetes.namespace
    wanted = []
    if frontend_https(topo):
        wanted.append((frontend_secret(topo), "the frontend's server certificate (SANs: "
                       + ", ".join(frontend_dns_names(topo)[:2]) + ")"))
    if frontend_needs_client_cert(topo):
        wanted.append((client_secret(topo), "the pods' client certificate"))
    return [f"kubectl create secret generic {name} -n {namespace} --from-file=tls.crt=CERT.pem "
            f"--from-file=tls.key=KEY.pem --from-file=ca.crt=CA.pem  # {what}, signed by the "
            "CA the platform's etcd and NATS (and the frontend's clients) trust"
            for name, what in wanted]
