"""A graph's own CA (`security.tls.mode: auto`): the chain verifies for every node address and
for loopback, a server asks for and checks client certificates, the certificates expire when
they say, and the keys land 0600 in a 0700 directory, never through a link."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import ssl
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from dis_serve.errors import UserInputError
from dis_serve.security.certs import issue_graph_ca, issue_graph_pki, issue_node_server, write_pki

NOW = dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.UTC)
ADDRESSES = ["198.18.0.11", "198.18.0.12", "node3.cluster"]


@pytest.fixture(scope="module")
def pki():
    return issue_graph_pki("demo", ADDRESSES, now=NOW, validity_days=30)


def _cert(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def _verifier(pki, at: dt.datetime = NOW):
    return PolicyBuilder().store(Store([_cert(pki.ca_cert)])).time(at)


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


@pytest.mark.parametrize("name", [*ADDRESSES, "127.0.0.1", "::1", "localhost"])
def test_the_server_certificate_verifies_for_every_node_address_and_loopback(pki, name):
    verifier = _verifier(pki).build_server_verifier(_san(name))
    chain = verifier.verify(_cert(pki.server_cert), [])
    assert chain[-1] == _cert(pki.ca_cert)


def test_the_server_certificate_does_not_verify_for_another_address(pki):
    verifier = _verifier(pki).build_server_verifier(_san("198.18.0.99"))
    with pytest.raises(VerificationError):
        verifier.verify(_cert(pki.server_cert), [])


def test_the_client_certificate_verifies_as_a_client_of_the_graphs_ca(pki):
    verified = _verifier(pki).build_client_verifier().verify(_cert(pki.client_cert), [])
    assert verified.chain[-1] == _cert(pki.ca_cert)


def test_another_graphs_ca_does_not_vouch_for_this_graphs_certificates(pki):
    other = issue_graph_pki("other", ADDRESSES, now=NOW)
    verifier = _verifier(other).build_server_verifier(_san("198.18.0.11"))
    with pytest.raises(VerificationError):
        verifier.verify(_cert(pki.server_cert), [])


def test_the_certificates_expire_after_validity_days(pki):
    for pem in (pki.ca_cert, pki.server_cert, pki.client_cert):
        assert _cert(pem).not_valid_after_utc == NOW + dt.timedelta(days=30)
    late = _verifier(pki, NOW + dt.timedelta(days=30, seconds=1))
    with pytest.raises(VerificationError):
        late.build_server_verifier(_san("198.18.0.11")).verify(_cert(pki.server_cert), [])


def test_only_the_ca_may_sign_certificates(pki):
    assert _cert(pki.ca_cert).extensions.get_extension_for_class(
        x509.BasicConstraints).value.ca is True
    for pem in (pki.server_cert, pki.client_cert):
        assert _cert(pem).extensions.get_extension_for_class(
            x509.BasicConstraints).value.ca is False


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str) -> None:
    """A TLS handshake in memory (no socket, no network) between the two contexts."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client_end = client.wrap_bio(c_in, c_out, server_hostname=host)
    server_end = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for name, end in (("client", client_end), ("server", server_end)):
            if not done[name]:
                try:
                    end.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            client_end.write(b"ping")
            s_in.write(c_out.read())
            assert server_end.read(4) == b"ping"
            return
    raise AssertionError("handshake did not finish")


def _contexts(tmp_path: Path, pki, *, client_cert: bool):
    paths = write_pki(pki, tmp_path / "tls")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(paths.server_cert, paths.server_key)
    server.load_verify_locations(paths.ca_cert)
    server.verify_mode = ssl.CERT_REQUIRED
    client = ssl.create_default_context(cafile=str(paths.ca_cert))
    if client_cert:
        client.load_cert_chain(paths.client_cert, paths.client_key)
    return server, client


def test_a_client_with_the_graphs_certificate_completes_mutual_tls(tmp_path):
    pki = issue_graph_pki("demo", ["127.0.0.1"])  # now: OpenSSL checks the real clock
    server, client = _contexts(tmp_path, pki, client_cert=True)
    _handshake(server, client, "127.0.0.1")


def test_a_client_without_a_certificate_is_refused(tmp_path):
    pki = issue_graph_pki("demo", ["127.0.0.1"])
    server, client = _contexts(tmp_path, pki, client_cert=False)
    with pytest.raises(ssl.SSLError):
        _handshake(server, client, "127.0.0.1")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_files_are_private_whatever_the_umask(tmp_path, pki):
    old = os.umask(0)
    try:
        paths = write_pki(pki, tmp_path / "tls")
    finally:
        os.umask(old)
    assert _mode(tmp_path / "tls") == 0o700
    for path in (paths.ca_cert, paths.server_cert, paths.server_key, paths.client_cert,
                 paths.client_key):
        assert _mode(Path(path)) == 0o600, path
    assert Path(paths.server_key).read_bytes() == pki.server_key


def test_a_link_where_a_key_goes_is_replaced_not_written_through(tmp_path, pki):
    directory = tmp_path / "tls"
    directory.mkdir(mode=0o700)
    target = tmp_path / "attacker-reads-this"
    target.write_bytes(b"")
    (directory / "server-key.pem").symlink_to(target)
    paths = write_pki(pki, directory)
    assert target.read_bytes() == b""
    assert not Path(paths.server_key).is_symlink()


def test_a_certificate_directory_that_is_a_link_is_refused(tmp_path, pki):
    (tmp_path / "real").mkdir()
    (tmp_path / "tls").symlink_to(tmp_path / "real")
    with pytest.raises(UserInputError, match="symbolic link"):
        write_pki(pki, tmp_path / "tls")
    assert list((tmp_path / "real").iterdir()) == []


def test_a_node_certificate_signed_later_never_outlives_the_graphs_ca():
    ca = issue_graph_ca("demo", now=NOW, validity_days=30)
    cert, _ = issue_node_server("demo", "n2", ["198.18.0.12"], ca.ca_cert, ca.ca_key,
                                now=NOW + dt.timedelta(days=10), validity_days=30)
    assert _cert(cert).not_valid_after_utc <= _cert(ca.ca_cert).not_valid_after_utc
    verifier = (PolicyBuilder().store(Store([_cert(ca.ca_cert)]))
                .time(NOW + dt.timedelta(days=10))
                .build_server_verifier(_san("198.18.0.12")))
    verifier.verify(_cert(cert), [])
