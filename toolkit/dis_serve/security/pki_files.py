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
