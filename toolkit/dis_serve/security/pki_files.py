"""Where a graph's TLS files are: the names every plane's settings point at. Paths only (no
`cryptography` import), so renderers can name them before `up` makes them."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

# The run directory's subdirectory that `tls: auto` writes (0700, files 0600).
TLS_DIR = "tls"


class PkiPaths(BaseModel):
    """The CA bundle, the certificate the graph's servers present (and its key), and the
    certificate its clients present (and its key)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ca_cert: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def pki_paths(directory: Path | str) -> PkiPaths:
    """The files `tls: auto` writes into `directory`."""
    d = str(directory)
    return PkiPaths(ca_cert=f"{d}/ca.pem", server_cert=f"{d}/server.pem",
                    server_key=f"{d}/server-key.pem", client_cert=f"{d}/client.pem",
                    client_key=f"{d}/client-key.pem")


def nats_token_path(directory: Path | str) -> str:
    """The NATS token dis-serve makes beside the certificates when the topology names none
    (`coordination.nats.auth` unset, `tls.mode: auto`): a second secret besides the client
    certificate, as NATS's own deployments pair TLS with a token."""
    return f"{directory}/nats-token"


def ca_key_path(directory: Path | str) -> str:
    """A multi-node graph's CA key, beside its certificate: each node's agent signs its own
    server certificate with it (the node's address may be known only there)."""
    return f"{directory}/ca-key.pem"


def node_pki_paths(directory: Path | str, node: str) -> PkiPaths:
    """The files of node `node` of a multi-node graph: the graph's CA and client certificate,
    and the node's own server certificate (its address as SAN), in `node-<name>/`."""
    shared = pki_paths(directory)
    own = f"{directory}/node-{node}"
    return shared.model_copy(update={"server_cert": f"{own}/server.pem",
                                     "server_key": f"{own}/server-key.pem"})


def balancer_pem_path(directory: Path | str, node: str) -> str:
    """A node's certificate and key in one file, as haproxy reads them (its balancer)."""
    return f"{directory}/node-{node}/balancer.pem"


def client_bundle_path(directory: Path | str) -> str:
    """The graph's client certificate and key in one file, as haproxy presents them."""
    return f"{directory}/client-bundle.pem"


class FrontendTlsFiles(BaseModel):
    """What the frontend's HTTPS server reads: its certificate and key, and the CA its
    clients' certificates must chain to (None: no client certificates asked for)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    cert: str
    key: str
    client_ca: str | None = None


class EndpointTls(BaseModel):
    """What a client of the graph's HTTPS endpoint needs: the CA bundle its certificate is
    checked against and, when the frontend asks for one, the certificate (and key) to
    present. Paths only: the plan and the state file carry it, never key material."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ca_cert: str
    client_cert: str | None = None
    client_key: str | None = None
