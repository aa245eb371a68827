"""`security.tls` on Kubernetes, as the pods see it: the frontend serves HTTPS from one Secret,
and every Dynamo pod (frontend, workers, planner) holds the graph's own certificate from
another, with which it serves and calls the request plane (mutual TLS between the graph's
pods) and, where the platform's NATS and etcd require TLS (`kubernetes.tls.planes`), meets
them. Who makes the two Secrets is `kubernetes.tls.certificates`: secrets.py
(dis-serve's own CA), certificates.py (cert-manager) or the user.

Secrets hold `tls.crt`, `tls.key` and `ca.crt` (what cert-manager writes). Dynamo 1.6.1
reads etcd's client credentials as PEM text (ETCD_AUTH_*: render/tls_planes.py), so those
come from the Secret's keys as environment values; the request plane, NATS and the frontend
read paths, so the Secrets are also mounted read-only. Pod addresses change with every
restart, so no certificate names one: callers check the request plane's certificate against
one fixed name (DYN_TCP_TLS_SERVER_NAME, measured on Dynamo 1.6.1 to be the name its TCP
clients verify). Nothing here holds key material. Pure: returns Python objects.
"""

from __future__ import annotations

from typing import Any

from ...render.model_ready import ROUTED_CHAT_PATH, routed_chat
from ...render.tls_planes import ETCD_CLIENT_PEM_ENV, dynamo_tls_env
from ...security.pki_files import FrontendTlsFiles, PkiPaths
from ...topology import CertificateSource, Topology

FRONTEND_TLS_MOUNT = "/etc/dis-serve/tls/frontend"
CLIENT_TLS_MOUNT = "/etc/dis-serve/tls/client"
# The Secret's key for each PkiPaths-style role.
SECRET_KEYS = {"ca_cert": "ca.crt", "client_cert": "tls.crt", "client_key": "tls.key"}
PROBE_TIMEOUT_S = 5
# The pods' certificate, where it is mounted: one certificate for both ends of the request
# plane (workers serve with it and ask callers for theirs; the frontend's response stream
# the other way round).
POD_PATHS = PkiPaths(ca_cert=f"{CLIENT_TLS_MOUNT}/ca.crt",
                     server_cert=f"{CLIENT_TLS_MOUNT}/tls.crt",
                     server_key=f"{CLIENT_TLS_MOUNT}/tls.key",
                     client_cert=f"{CLIENT_TLS_MOUNT}/tls.crt",
                     client_key=f"{CLIENT_TLS_MOUNT}/tls.key")


def tls_on(topo: Topology) -> bool:
    return topo.security.tls.mode.encrypts


def frontend_https(topo: Topology) -> bool:
    """In a cluster the frontend always serves a Service, i.e. the network."""
    return topo.security.frontend_tls(off_loopback=True)


def planes_tls(topo: Topology) -> bool:
    """The pods meet the platform's etcd and NATS over TLS with their certificate."""
    return tls_on(topo) and topo.kubernetes.tls.planes


def frontend_secret(topo: Topology) -> str:
    return topo.kubernetes.tls.frontend_secret or f"{topo.name}-frontend-tls"


def client_secret(topo: Topology) -> str:
    return topo.kubernetes.tls.client_secret or f"{topo.name}-client-tls"


def request_plane_name(topo: Topology) -> str:
    """The one name the request plane's callers check in the pods' certificate."""
    return f"request-plane.{topo.name}.{topo.kubernetes.namespace}.dis-serve"


def pod_dns_names(topo: Topology) -> list[str]:
    return [request_plane_name(topo), f"client.{topo.name}.dis-serve"]


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


def wanted_certificates(topo: Topology) -> dict[str, tuple[list[str], bool]]:
    """Secret name -> (its certificate's DNS names, whether it also serves the request plane)
    for every Secret the graph's pods mount; empty without TLS."""
    if not tls_on(topo):
        return {}
    wanted: dict[str, tuple[list[str], bool]] = {}
    if frontend_https(topo):
        wanted[frontend_secret(topo)] = (frontend_dns_names(topo), False)
    wanted[client_secret(topo)] = (pod_dns_names(topo), True)
    return wanted


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


def tls_volumes(topo: Topology, *, frontend: bool) -> tuple[list[dict], list[dict]]:
    """(volumeMounts, volumes) of a Dynamo pod: the pods' Secret, and on the frontend its
    serving Secret."""
    mounts, volumes = [], []
    if frontend and frontend_https(topo):
        mounts.append(_mount("frontend-tls", FRONTEND_TLS_MOUNT))
        volumes.append(_secret_volume("frontend-tls", frontend_secret(topo)))
    if tls_on(topo):
        mounts.append(_mount("client-tls", CLIENT_TLS_MOUNT))
        volumes.append(_secret_volume("client-tls", client_secret(topo)))
    return mounts, volumes


def planes_env(topo: Topology) -> list[dict[str, Any]]:
    """The environment every Dynamo pod needs for TLS: the request plane's two ends always,
    the platform's etcd and NATS only where they require it."""
    if not tls_on(topo):
        return []
    env: list[dict[str, Any]] = [
        {"name": name, "value": value}
        for name, value in dynamo_tls_env(POD_PATHS, nats=planes_tls(topo)).items()]
    env.append({"name": "DYN_TCP_TLS_SERVER_NAME", "value": request_plane_name(topo)})
    if not planes_tls(topo):
        return env
    secret = client_secret(topo)
    env += [{"name": name, "valueFrom": {"secretKeyRef": {"name": secret,
                                                          "key": SECRET_KEYS[role]}}}
            for name, role in ETCD_CLIENT_PEM_ENV.items()]
    kube = topo.kubernetes.tls
    if kube.etcd_endpoints:
        env.append({"name": "ETCD_ENDPOINTS", "value": kube.etcd_endpoints})
    if kube.nats_server:
        env.append({"name": "NATS_SERVER", "value": kube.nats_server})
    return env


def _health_check(path: str, port: int) -> list[str]:
    # kubelet's HTTPS probes present no client certificate: a frontend that asks for one is
    # probed from inside its pod, with the graph's certificate and CA (the name is not
    # checked: the probe calls 127.0.0.1, the chain is).
    return frontend_check(True, True, port, [path])


def frontend_check(https: bool, client_certs: bool, port: int, paths: list[str],
                   chat: dict[str, object] | None = None) -> list[str]:
    """A check run in the frontend's pod (python3, which its image has): GET each of
    `paths` on 127.0.0.1:`port`, then POST `chat` as JSON to render/model_ready.py's chat
    path; fails on the first answer that is not 2xx. Over HTTPS with the mounted CA (the
    name is not checked: the check calls 127.0.0.1, the chain is) and, when the frontend
    asks for one, the pods' client certificate."""
    base = f"{'https' if https else 'http'}://127.0.0.1:{port}"
    lines = ["import json,ssl,urllib.request as r", "c=None"]
    if https:
        lines += [f"c=ssl.create_default_context(cafile='{FRONTEND_TLS_MOUNT}/ca.crt')",
                  "c.check_hostname=False"]
    if https and client_certs:
        lines.append(f"c.load_cert_chain('{CLIENT_TLS_MOUNT}/tls.crt',"
                     f"'{CLIENT_TLS_MOUNT}/tls.key')")
    lines += [f"r.urlopen({base + path!r},context=c,timeout={PROBE_TIMEOUT_S})"
              for path in paths]
    if chat is not None:
        lines.append(f"r.urlopen(r.Request({base + ROUTED_CHAT_PATH!r},"
                     f"data=json.dumps({chat!r}).encode(),"
                     "headers={'Content-Type':'application/json'}),"
                     f"context=c,timeout={PROBE_TIMEOUT_S})")
    return ["python3", "-c", "\n".join(lines)]


def frontend_routed_check(topo: Topology, ready_path: str, port: int) -> dict[str, Any]:
    """The frontend's startup probe: its model-ready path, then a one-token chat
    (render/model_ready.py: the ready path turns 200 before a disaggregated graph's prefill
    router is activated; kubelet's httpGet cannot POST, so the check runs in the pod)."""
    return {"exec": {"command": frontend_check(
        frontend_https(topo), topo.security.tls.frontend_client_certs, port, [ready_path],
        routed_chat(topo.model.name))}}


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


def secret_commands(topo: Topology) -> list[str]:
    """`kubectl` lines that make the Secrets by hand (`certificates: existing`)."""
    if topo.kubernetes.tls.certificates is not CertificateSource.EXISTING:
        return []
    namespace = topo.kubernetes.namespace
    what = {frontend_secret(topo): "the frontend's server certificate (SANs: {names})",
            client_secret(topo): "the pods' certificate, for server and client authentication "
                                 "(SANs: {names})"}
    trusted = ("the CA the platform's etcd and NATS trust" if planes_tls(topo)
               else "the graph's CA")
    return [f"kubectl create secret generic {name} -n {namespace} --from-file=tls.crt=CERT.pem "
            f"--from-file=tls.key=KEY.pem --from-file=ca.crt=CA.pem  # "
            + what[name].format(names=", ".join(names[:2])) + f", signed by {trusted}"
            for name, (names, _) in wanted_certificates(topo).items()]
