"""The topology's `security` section: TLS on etcd, NATS, the request plane (and the frontend
when asked), and the explicit words a graph needs to listen off loopback without it.

Pure schema: no files are read here (a `files` PEM's existence is a preflight matter).
The topology's cross-field rule (off loopback needs TLS unless `insecure_network`) is
`exposure_problem`, which rules.check_security calls with what the topology knows.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field, model_validator

from .base import Strict


class TlsMode(StrEnum):
    """Where the graph's certificates come from."""

    AUTO = "auto"    # dis-serve makes a CA and the certificates per graph, in the run directory
    FILES = "files"  # the user's PEM files
    OFF = "off"      # no TLS and no client certificates: anyone who can connect is in

    @property
    def encrypts(self) -> bool:
        return self is not TlsMode.OFF


class Tls(Strict):
    """Where the graph's certificates come from, and whether the frontend speaks HTTPS."""

    mode: TlsMode = Field(
        default=TlsMode.AUTO,
        description="auto (dis-serve makes a per-graph CA and certificates, keys 0600 in the "
                    "run directory) | files (your PEMs: ca_file, cert_file, key_file) | off.")
    ca_file: str | None = Field(
        default=None, description="files: the CA bundle (PEM) every plane trusts.")
    cert_file: str | None = Field(
        default=None,
        description="files: certificate (PEM) the graph's servers and clients present; its "
                    "SANs must cover every node's address.")
    key_file: str | None = Field(
        default=None, description="files: the certificate's private key (PEM, mode 0600).")
    frontend: bool | None = Field(
        default=None,
        description="HTTPS on the OpenAI endpoint (default: on off loopback, plain HTTP on "
                    "loopback, as curl and SDK habits expect).")
    frontend_client_certs: bool = Field(
        default=False,
        description="The frontend also asks clients for a certificate signed by the CA.")
    validity_days: int = Field(
        default=30, ge=1, le=825, description="auto: how long the certificates are valid.")

    @model_validator(mode="after")
    def _files_match_mode(self) -> Tls:
        given = [k for k in ("ca_file", "cert_file", "key_file") if getattr(self, k)]
        if self.mode is TlsMode.FILES and len(given) != 3:
            missing = [k for k in ("ca_file", "cert_file", "key_file") if k not in given]
            raise ValueError(f"security.tls.mode is files but {', '.join(missing)} "
                             "missing; give all three PEM paths or use mode: auto")
        if self.mode is not TlsMode.FILES and given:
            raise ValueError(f"security.tls.{given[0]} is set but mode is "
                             f"{self.mode.value}; set mode: files or remove it")
        if not self.mode.encrypts and (self.frontend or self.frontend_client_certs):
            raise ValueError("security.tls.frontend needs TLS; set mode: auto (or files) or "
                             "drop frontend/frontend_client_certs")
        if self.frontend is False and self.frontend_client_certs:
            raise ValueError("security.tls.frontend_client_certs needs frontend: true")
        return self


class Security(Strict):
    """Who may talk to the graph's planes."""

    tls: Tls = Field(default_factory=Tls, description="TLS and client certificates.")
    insecure_network: bool = Field(
        default=False,
        description="Let the graph listen off loopback without TLS (validate warns instead "
                    "of refusing). Anyone on that network can then read and write service "
                    "discovery and every request.")

    def frontend_tls(self, off_loopback: bool) -> bool:
        """Whether the OpenAI endpoint speaks HTTPS."""
        if not self.tls.mode.encrypts:
            return False
        return off_loopback if self.tls.frontend is None else self.tls.frontend


def exposure_problem(security: Security, off_loopback_because: str | None) -> str | None:
    """Why this graph may not run as written (None: it may). `off_loopback_because` says
    what puts it on the network (`placement slurm`, `frontend.host 0.0.0.0`), None if
    nothing does."""
    if off_loopback_because is None or security.tls.mode.encrypts or security.insecure_network:
        return None
    return (f"security.tls.mode is off but the graph listens off loopback "
            f"({off_loopback_because}): etcd, NATS and every request would cross the network "
            "in clear text, open to anyone on it; set security.tls.mode: auto, or "
            "security.insecure_network: true to accept that")


def security_warnings(security: Security, off_loopback_because: str | None) -> list[str]:
    """What this graph's settings expose (allowed, but said out loud)."""
    if security.tls.mode.encrypts:
        return []
    if off_loopback_because is not None:
        return [f"security.insecure_network is true and TLS is off while the graph listens "
                f"off loopback ({off_loopback_because}): anyone on that network can read and "
                "write its etcd keys, subscribe to its NATS subjects and read every prompt"]
    return ["security.tls.mode is off: any user of this machine can read and write the "
            "graph's etcd keys, subscribe to its NATS subjects and connect to its workers' "
            "request ports (loopback is shared by every local user)"]
