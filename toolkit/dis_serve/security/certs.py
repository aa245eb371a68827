"""A graph's own certificate authority (`security.tls.mode: auto`): one CA per graph, a server
certificate whose SANs are the graph's node addresses, and a client certificate for the
graph's own processes and dis-serve's clients. Made with the `cryptography` library.

Issuing is pure (`issue_graph_pki`: names, addresses and a clock in, PEM bytes out);
`write_pki` puts the files in a private directory, keys 0600 and created exclusively, and
returns only their paths: keys travel as paths (to files only their owner can read), never
as argv, environment values or rendered text.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from ..files.private_path import PRIVATE_FILE, ensure_private_dir, open_private
from .pki_files import PkiPaths, ca_key_path, nats_token_path, node_pki_paths, pki_paths

# Every graph listens on loopback too (probes, local clients): always in the server's SANs.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# Client certificates name who holds them; the server certificate's CN is informative only
# (clients check the SANs).
CLIENT_NAME = "dis-serve client"
# A little slack for clocks that differ between nodes.
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class GraphPki:
    """PEM bytes of a graph's CA, server and client certificates and their keys."""

    ca_cert: bytes
    server_cert: bytes
    server_key: bytes
    client_cert: bytes
    client_key: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    # P-256: every TLS stack of the graph takes it (Go's etcd and NATS, rustls in Dynamo,
    # OpenSSL in Python's clients) and it signs in microseconds.
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(common_name: str, graph: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "dis-serve"),
                      x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, graph),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def subject_alt_names(addresses: list[str]) -> list[x509.GeneralName]:
    """IP addresses as IP SANs, anything else as a DNS name; loopback always; no repeats."""
    names: list[x509.GeneralName] = []
    for address in [*addresses, *LOOPBACK_NAMES]:
        try:
            entry: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(address))
        except ValueError:
            entry = x509.DNSName(address)
        if entry not in names:
            names.append(entry)
    return names


def _certificate(subject: x509.Name, key, issuer: x509.Name, signer, *, now: dt.datetime,
                 days: int, ca: bool, extensions: list[tuple[x509.ExtensionType, bool]],
                 issuer_key=None) -> x509.Certificate:
    builder = (x509.CertificateBuilder()
               .subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number())
               .not_valid_before(now - BACKDATE)
               .not_valid_after(now + dt.timedelta(days=days))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None),
                              critical=True)
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                              critical=False))
    if issuer_key is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
            critical=False)
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def _usage(*, ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(digital_signature=not ca, content_commitment=False,
                         key_encipherment=False, data_encipherment=False,
                         key_agreement=False, key_cert_sign=ca, crl_sign=ca,
                         encipher_only=False, decipher_only=False)


def _ca(graph: str, now: dt.datetime, days: int):
    key = _key()
    name = _name(f"dis-serve CA for {graph}", graph)
    cert = _certificate(name, key, name, key, now=now, days=days, ca=True,
                        extensions=[(_usage(ca=True), True)])
    return cert, key


def _server(graph: str, addresses: list[str], ca: x509.Certificate, ca_key, *,
            now: dt.datetime, days: int, common_name: str | None = None):
    """A certificate for server and client authentication (etcd peers, the request plane's
    two ends) whose SANs are `addresses` and loopback; it never outlives its CA."""
    key = _key()
    days = min(days, max(0, (ca.not_valid_after_utc - now).days))
    cert = _certificate(
        _name(common_name or f"dis-serve {graph}", graph), key, ca.subject, ca_key, now=now,
        days=days, ca=False, issuer_key=ca_key,
        extensions=[(_usage(ca=False), True),
                    (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                            ExtendedKeyUsageOID.CLIENT_AUTH]), False),
                    (x509.SubjectAlternativeName(subject_alt_names(addresses)), False)])
    return cert, key


def _client(graph: str, ca: x509.Certificate, ca_key, *, now: dt.datetime, days: int):
    key = _key()
    cert = _certificate(
        _name(CLIENT_NAME, graph), key, ca.subject, ca_key, now=now, days=days,
        ca=False, issuer_key=ca_key,
        extensions=[(_usage(ca=False), True),
                    (x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False),
                    # RFC 5280 verifiers want a SAN on every leaf; a name, not an address.
                    (x509.SubjectAlternativeName([x509.DNSName(f"client.{graph}.dis-serve")]),
                     False)])
    return cert, key


_PEM = serialization.Encoding.PEM


def issue_graph_pki(graph: str, addresses: list[str], *, now: dt.datetime | None = None,
                    validity_days: int = 30) -> GraphPki:
    """A new CA for graph `graph`, a server certificate for `addresses` (and loopback),
    valid for server and client authentication (etcd peers, the request plane's two ends),
    and a client-only certificate."""
    now = now or dt.datetime.now(dt.UTC)
    ca, ca_key = _ca(graph, now, validity_days)
    server, server_key = _server(graph, addresses, ca, ca_key, now=now, days=validity_days)
    client, client_key = _client(graph, ca, ca_key, now=now, days=validity_days)
    return GraphPki(ca_cert=ca.public_bytes(_PEM), server_cert=server.public_bytes(_PEM),
                    server_key=_pem_key(server_key), client_cert=client.public_bytes(_PEM),
                    client_key=_pem_key(client_key))


@dataclass(frozen=True)
class GraphCa:
    """A multi-node graph's CA with its key (each node's agent signs its own server
    certificate with it, for the address it finds at start) and the graph's client
    certificate."""

    ca_cert: bytes
    ca_key: bytes
    client_cert: bytes
    client_key: bytes


def issue_graph_ca(graph: str, *, now: dt.datetime | None = None,
                   validity_days: int = 30) -> GraphCa:
    """A new CA for `graph` and its client certificate; no server certificate yet (a node's
    address may be known only on the node: `issue_node_server`)."""
    now = now or dt.datetime.now(dt.UTC)
    ca, ca_key = _ca(graph, now, validity_days)
    client, client_key = _client(graph, ca, ca_key, now=now, days=validity_days)
    return GraphCa(ca_cert=ca.public_bytes(_PEM), ca_key=_pem_key(ca_key),
                   client_cert=client.public_bytes(_PEM), client_key=_pem_key(client_key))


def issue_node_server(graph: str, node: str, addresses: list[str], ca_cert: bytes,
                      ca_key: bytes, *, now: dt.datetime | None = None,
                      validity_days: int = 30) -> tuple[bytes, bytes]:
    """(certificate, key) PEM of node `node`'s servers, SANs `addresses` and loopback,
    signed by the graph's CA."""
    now = now or dt.datetime.now(dt.UTC)
    ca = x509.load_pem_x509_certificate(ca_cert)
    signer = serialization.load_pem_private_key(ca_key, password=None)
    cert, key = _server(graph, addresses, ca, signer, now=now, days=validity_days,
                        common_name=f"dis-serve {graph} node {node}")
    return cert.public_bytes(_PEM), _pem_key(key)


def write_private_files(directory: Path, files: dict[str, bytes]) -> None:
    """Each `files` path (inside `directory`, made 0700; its parent must exist) as a new
    0600 file (a file or link already there is replaced, never written through)."""
    ensure_private_dir(directory, "certificate directory")
    for name, data in files.items():
        path = Path(name)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(tmp, path)


def write_nats_token(directory: Path) -> None:
    """A new random NATS token for the graph (0600, in the certificate directory)."""
    write_private_files(directory, {
        nats_token_path(directory): secrets.token_urlsafe(32).encode() + b"\n"})


def write_pki(pki: GraphPki, directory: Path) -> PkiPaths:
    """Write the PEM files into `directory` (made 0700; its parent must exist), every file
    0600 and new (a file or link already there is replaced, never written through)."""
    paths = pki_paths(directory)
    write_private_files(directory, {
        paths.ca_cert: pki.ca_cert, paths.server_cert: pki.server_cert,
        paths.server_key: pki.server_key, paths.client_cert: pki.client_cert,
        paths.client_key: pki.client_key})
    return paths


def write_graph_ca(ca: GraphCa, directory: Path) -> PkiPaths:
    """A multi-node graph's CA (with its key) and client certificate into `directory`, as
    `write_pki` does; the server files are each node's (`write_node_server`)."""
    paths = pki_paths(directory)
    write_private_files(directory, {
        paths.ca_cert: ca.ca_cert, ca_key_path(directory): ca.ca_key,
        paths.client_cert: ca.client_cert, paths.client_key: ca.client_key})
    return paths


def write_node_server(directory: Path, node: str, cert: bytes, key: bytes) -> PkiPaths:
    """Node `node`'s server certificate and key into its own directory under `directory`."""
    paths = node_pki_paths(directory, node)
    write_private_files(Path(paths.server_cert).parent,
                        {paths.server_cert: cert, paths.server_key: key})
    return paths


def issue_named_certificates(graph: str, wanted: dict[str, list[str]], *,
                             now: dt.datetime | None = None, validity_days: int = 30
                             ) -> tuple[bytes, dict[str, tuple[bytes, bytes]]]:
    """A new CA for `graph` and, for each entry of `wanted`, a certificate for server and
    client authentication whose SANs are its names (and loopback), signed by that CA:
    (CA certificate PEM, {entry: (certificate PEM, key PEM)}). The CA's key is not returned:
    nothing can sign with it later."""
    now = now or dt.datetime.now(dt.UTC)
    ca, ca_key = _ca(graph, now, validity_days)
    issued = {}
    for entry, names in wanted.items():
        cert, key = _server(graph, names, ca, ca_key, now=now, days=validity_days,
                            common_name=names[0])
        issued[entry] = (cert.public_bytes(_PEM), _pem_key(key))
    return ca.public_bytes(_PEM), issued


def certificate_fits(ca_cert: bytes, cert: bytes, names: list[str], *, now: dt.datetime,
                     days_left: float) -> bool:
    """Whether `cert` was signed by `ca_cert`, names every one of `names` and stays valid,
    with its CA, for `days_left` more days."""
    try:
        ca = x509.load_pem_x509_certificate(ca_cert)
        leaf = x509.load_pem_x509_certificate(cert)
        leaf.verify_directly_issued_by(ca)
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    wanted = set(subject_alt_names(names))
    until = now + dt.timedelta(days=days_left)
    return wanted <= set(sans) and min(leaf.not_valid_after_utc, ca.not_valid_after_utc) > until
