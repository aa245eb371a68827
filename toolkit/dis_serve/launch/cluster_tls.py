"""TLS of a multi-node graph (hosts, Slurm) with `security.tls.mode: auto`.

A node's address may be known only on the node itself (a Slurm job resolves it there; a
hosts script can take it from its environment), so the certificates are made in two steps:
- before the nodes start (`up` for Slurm, `render` for hosts and Slurm): the graph's CA, its
  key and the client certificate, into the run directory's `tls/` (0700, files 0600; the
  run directory is the user's own, on storage the nodes share or copied to each);
- each node's agent, before its processes start: the node's server certificate, its own
  address as SAN (where clients call the node, also `frontend.host` and the floating
  address), signed with that CA, into `tls/node-<name>/`; beside it, on a balancer's node,
  the certificate and key in one file as haproxy reads them (and the client certificate
  likewise). The NATS members' configs are node_configs.py's.
Whoever can read the run directory can act as the graph either way (the client key is
there), so the CA key beside it gives away nothing more.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import UserInputError
from ..files.private_path import read_own_text
from ..render.cluster_plan import NodeProcesses
from ..render.shell_words import resolve_runtime
from ..render.tls_planes import generates_nats_token, node_pki
from ..security.pki_files import (
    TLS_DIR,
    PkiPaths,
    balancer_pem_path,
    ca_key_path,
    client_bundle_path,
    pki_paths,
)
from ..topology import ProcessKind, Topology
from ..topology.security import TlsMode
from .secrets import GraphSecrets, graph_secrets


def write_cluster_ca(topo: Topology, run_dir: Path) -> None:
    """The graph's CA and client certificate in `run_dir/tls` (a new CA each time; nothing
    without `tls.mode: auto`), and its NATS token where dis-serve makes one."""
    if topo.security.tls.mode is not TlsMode.AUTO:
        return
    from ..security.certs import issue_graph_ca, write_graph_ca, write_nats_token

    write_graph_ca(issue_graph_ca(topo.name, validity_days=topo.security.tls.validity_days),
                   run_dir / TLS_DIR)
    if generates_nats_token(topo):
        write_nats_token(run_dir / TLS_DIR)


def node_server_names(topo: Topology, address: str, serves_clients: bool) -> list[str]:
    """The SANs of a node's server certificate: its address; on a node that clients call
    (the head's lone frontend, a balancer in front of replicas) of a graph that serves
    HTTPS, also the names they call it by: the floating address, `frontend.host` (or this
    machine's addresses and host names when it binds every interface)."""
    from ..security.host_names import frontend_names

    names = [address]
    if serves_clients and topo.frontend_https:
        if topo.frontend.floating_address is not None:
            names.append(topo.frontend.floating_address.address)
        if topo.frontend.host is not None:
            names += frontend_names(topo.frontend.host)
    return list(dict.fromkeys(names))


def serves_clients(topo: Topology, node: NodeProcesses) -> bool:
    """Whether clients call this node: it runs the balancer, or the lone frontend."""
    entry = topo.frontend.entry_kind
    return any(p.kind is entry for p in node.processes)


def _issue_node_certificate(topo: Topology, node: str, names: list[str], tls_dir: Path) -> None:
    from ..security.certs import issue_node_server, write_node_server

    ca_file = Path(pki_paths(tls_dir).ca_cert)
    try:
        ca_cert = read_own_text(ca_file).encode()
        ca_key = read_own_text(Path(ca_key_path(tls_dir))).encode()
    except FileNotFoundError:
        raise UserInputError(
            f"{ca_file} is missing: this graph has security.tls.mode auto and its CA is made "
            "before the nodes start", key="security.tls.mode",
            fix="run `dis-serve up` (Slurm) or `dis-serve render` again and copy its tls/ "
                "directory with the scripts to every node") from None
    cert, key = issue_node_server(topo.name, node, names, ca_cert, ca_key,
                                  validity_days=topo.security.tls.validity_days)
    write_node_server(tls_dir, node, cert, key)


def prepare_node_tls(topo: Topology, node: NodeProcesses, values: dict[str, str],
                     run_dir: Path) -> GraphSecrets:
    """Before node `node`'s processes start: its server certificate for the address it has
    (`values` resolves the plan's run-time addresses), the head's NATS config; the secrets
    its processes get (launch/secrets.py: etcd's client PEMs, the NATS token)."""
    if topo.security.tls.mode is TlsMode.AUTO:
        names = node_server_names(topo, resolve_runtime(node.address, values),
                                  serves_clients(topo, node))
        _issue_node_certificate(topo, node.name, names, run_dir / TLS_DIR)
    paths = node_pki(topo.security, run_dir, node.name)
    if any(p.kind is ProcessKind.BALANCER for p in node.processes) and paths is not None \
            and topo.frontend_https:
        write_balancer_bundles(paths, node.name, run_dir)
    return graph_secrets(topo, run_dir)


def write_balancer_bundles(paths: PkiPaths, node: str, run_dir: Path) -> None:
    """haproxy reads a certificate and its key from one file: the node's (what it presents
    to clients) and the graph's client certificate (what it presents to the replicas)."""
    from ..security.certs import write_private_files

    def bundle(cert: str, key: str) -> bytes:
        return (read_own_text(Path(cert)) + read_own_text(Path(key))).encode()

    tls_dir = run_dir / TLS_DIR
    write_private_files(tls_dir / f"node-{node}", {
        balancer_pem_path(tls_dir, node): bundle(paths.server_cert, paths.server_key)})
    write_private_files(tls_dir, {
        client_bundle_path(tls_dir): bundle(paths.client_cert, paths.client_key)})
