"""`security.tls` as each plane's settings: etcd's server flags, the NATS server's `tls`
block, the environment Dynamo 1.6.1's runtime reads (names checked against its `_core`
library: ETCD_AUTH_*, NATS_TLS_*, DYN_TCP_TLS_*), and the frontend's HTTPS files with what
our own clients of it need.

Every plane is mutual TLS: servers present the graph's server certificate and ask for a
client certificate signed by the graph's CA, so a client without one (another local user,
a node that is not ours) is refused before it reads or writes anything. Paths only, never
key material. Pure.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..security.pki_files import (
    TLS_DIR,
    EndpointTls,
    FrontendTlsFiles,
    PkiPaths,
    node_pki_paths,
    pki_paths,
)
from ..topology import NatsMode, Topology
from ..topology.security import Security, TlsMode


def graph_pki_paths(security: Security, run_dir: Path | str) -> PkiPaths | None:
    """The files the graph's planes use, or None without TLS: the run directory's own
    (auto) or the user's PEMs (files: one certificate for servers and clients)."""
    tls = security.tls
    if tls.mode is TlsMode.OFF:
        return None
    if tls.mode is TlsMode.AUTO:
        return pki_paths(f"{run_dir}/{TLS_DIR}")
    assert tls.ca_file and tls.cert_file and tls.key_file
    return PkiPaths(ca_cert=tls.ca_file, server_cert=tls.cert_file, server_key=tls.key_file,
                    client_cert=tls.cert_file, client_key=tls.key_file)


def node_pki(security: Security, run_dir: Path | str, node: str) -> PkiPaths | None:
    """The files node `node` of a multi-node graph uses: with `auto`, its own server
    certificate (issued by its agent for the address it has: launch/cluster_tls.py) beside the
    graph's CA and client certificate; with `files`, the user's PEMs on every node."""
    if security.tls.mode is TlsMode.AUTO:
        return node_pki_paths(f"{run_dir}/{TLS_DIR}", node)
    return graph_pki_paths(security, run_dir)


def generates_nats_token(topo: Topology) -> bool:
    """dis-serve makes the embedded NATS server's token (security/pki_files.nats_token_path)
    when the topology names none and the certificates are dis-serve's too."""
    nats = topo.coordination.nats
    return (nats.mode is NatsMode.EMBEDDED and nats.auth is None
            and topo.security.tls.mode is TlsMode.AUTO)


def etcd_tls_args(paths: PkiPaths) -> list[str]:
    """etcd's flags: TLS with client-certificate authentication for clients and its peer."""
    return ["--cert-file", paths.server_cert, "--key-file", paths.server_key,
            "--trusted-ca-file", paths.ca_cert, "--client-cert-auth",
            "--peer-cert-file", paths.server_cert, "--peer-key-file", paths.server_key,
            "--peer-trusted-ca-file", paths.ca_cert, "--peer-client-cert-auth"]


def nats_tls_block(paths: PkiPaths) -> str:
    """nats-server's `tls` block: TLS required, client certificates verified."""
    # JSON strings are valid NATS config strings: a path with a quote stays one string.
    return ("tls {\n"
            f"  cert_file: {json.dumps(paths.server_cert)}\n"
            f"  key_file: {json.dumps(paths.server_key)}\n"
            f"  ca_file: {json.dumps(paths.ca_cert)}\n"
            "  verify: true\n"
            "}\n")


# Dynamo 1.6.1 reads these three as PEM text, not paths (measured: paths give "client didn't
# provide a certificate"), so they hold the client key: launch/secrets.py puts them in the
# Dynamo processes' environment at start, never in the plan.
ETCD_CLIENT_PEM_ENV = {"ETCD_AUTH_CA": "ca_cert", "ETCD_AUTH_CLIENT_CERT": "client_cert",
                       "ETCD_AUTH_CLIENT_KEY": "client_key"}


def dynamo_tls_env(paths: PkiPaths, *, nats: bool = True) -> dict[str, str]:
    """The paths every Dynamo process needs: its NATS client certificate (for an embedded
    NATS: an external one has its own), and the request plane's two ends (workers serve
    with the server certificate and ask callers for theirs; callers check the worker
    against the CA and present the client certificate). etcd's are ETCD_CLIENT_PEM_ENV."""
    env = {}
    if nats:
        env |= {"NATS_TLS_CA_CERT_PATH": paths.ca_cert,
                "NATS_TLS_CLIENT_CERT_PATH": paths.client_cert,
                "NATS_TLS_CLIENT_KEY_PATH": paths.client_key}
    return env | {
        "DYN_TCP_TLS_CERT_PATH": paths.server_cert,
        "DYN_TCP_TLS_KEY_PATH": paths.server_key,
        "DYN_TCP_TLS_CLIENT_CA_CERT_PATH": paths.ca_cert,
        "DYN_TCP_TLS_CA_CERT_PATH": paths.ca_cert,
        "DYN_TCP_TLS_CLIENT_CERT_PATH": paths.client_cert,
        "DYN_TCP_TLS_CLIENT_KEY_PATH": paths.client_key,
    }


def frontend_tls_files(security: Security, paths: PkiPaths | None,
                       https: bool) -> FrontendTlsFiles | None:
    """The frontend's `--tls-*` files when it speaks HTTPS: the graph's server certificate,
    and its CA for client certificates when `frontend_client_certs` asks for them."""
    if not https or paths is None:
        return None
    return FrontendTlsFiles(cert=paths.server_cert, key=paths.server_key,
                            client_ca=paths.ca_cert if security.tls.frontend_client_certs
                            else None)


def endpoint_tls(security: Security, paths: PkiPaths | None,
                 https: bool) -> EndpointTls | None:
    """What dis-serve's own clients (probes, status, doctor, bench, chaos, top) need to talk
    to that frontend: its CA, and the graph's client certificate when it asks for one."""
    if not https or paths is None:
        return None
    if security.tls.frontend_client_certs:
        return EndpointTls(ca_cert=paths.ca_cert, client_cert=paths.client_cert,
                           client_key=paths.client_key)
    return EndpointTls(ca_cert=paths.ca_cert)
