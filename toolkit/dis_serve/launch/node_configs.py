"""The configurations a node's services read, written by its agent before they start, once
the node's address (and every other node's) is known: a NATS member's (its routes to the
other members), the balancer's (haproxy: every frontend replica, the address clients use)
and the floating address's (keepalived: the other frontend nodes). Paths and addresses only:
the NATS token stays in the server's environment, keys in their 0600 files."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..files.atomic_file import write_atomic
from ..files.private_path import PRIVATE_FILE
from ..render.balancer import (
    BID_FILE,
    HOLD_SOCKET,
    MONITOR_SOCKET,
    VRRP_PID_FILES,
    BalancerSettings,
    BalancerTls,
    Replica,
    VrrpSettings,
    balancer_config_name,
    haproxy_config,
    hold_script_name,
    hold_script_text,
    keepalived_config,
    vrrp_config_name,
)
from ..render.cluster_plan import ClusterPlan, NodeProcesses, resolved_launch_plan
from ..render.launch_plan import (
    LOCAL_NODE,
    LaunchPlan,
    NatsCluster,
    ProcessSpec,
    nats_config,
    nats_config_name,
)
from ..render.shell_words import resolve_runtime
from ..render.tls_planes import graph_pki_paths, node_pki
from ..security.pki_files import TLS_DIR, PkiPaths, balancer_pem_path, client_bundle_path
from ..topology import ProcessKind, Topology
from .cluster_tls import write_balancer_bundles
from .floating_address import release_stale_address, remove_pid_files


@dataclass(frozen=True)
class NodeContext:
    """One node as its agent sees the graph: the topology, the cluster plan with every
    address resolved, this node's share and its node-local data directory."""

    topo: Topology
    plan: ClusterPlan
    whole: LaunchPlan
    node: NodeProcesses
    values: dict[str, str]
    run_dir: Path
    data_dir: Path

    @classmethod
    def of(cls, topo: Topology, plan: ClusterPlan, node: NodeProcesses,
           values: dict[str, str], run_dir: Path, data_dir: Path) -> NodeContext:
        return cls(topo=topo, plan=plan, whole=resolved_launch_plan(plan, values, run_dir),
                   node=node, values=values, run_dir=run_dir, data_dir=data_dir)

    def address(self, node: NodeProcesses) -> str:
        return resolve_runtime(node.address, self.values)

    def nodes_running(self, kind: ProcessKind) -> list[NodeProcesses]:
        return [n for n in self.plan.nodes if any(p.kind is kind for p in n.processes)]

    def runs(self, kind: ProcessKind) -> bool:
        return any(p.kind is kind for p in self.node.processes)


def write_node_configs(ctx: NodeContext) -> None:
    """Every configuration this node's services read (none on a node that runs none)."""
    if ctx.runs(ProcessKind.NATS):
        _write_nats(ctx)
    if ctx.runs(ProcessKind.BALANCER):
        write_atomic(ctx.run_dir / hold_script_name(ctx.node.name), hold_script_text(),
                     PRIVATE_FILE)
        write_atomic(ctx.run_dir / balancer_config_name(ctx.node.name),
                     haproxy_config(balancer_settings(ctx)), PRIVATE_FILE)
    if ctx.runs(ProcessKind.VRRP):
        settings = vrrp_settings(ctx)
        write_atomic(ctx.run_dir / vrrp_config_name(ctx.node.name),
                     keepalived_config(settings), PRIVATE_FILE)
        release_stale_address(settings.floating_address, settings.interface)
        remove_pid_files([ctx.data_dir / name for name in VRRP_PID_FILES])


def _write_nats(ctx: NodeContext) -> None:
    members = ctx.nodes_running(ProcessKind.NATS)
    cluster = None
    if len(members) > 1:
        port = ctx.topo.coordination.nats.cluster_port
        cluster = NatsCluster(server_name=ctx.node.name, listen=f"{ctx.address(ctx.node)}:{port}",
                              routes=[f"{ctx.address(n)}:{port}" for n in members
                                      if n.name != ctx.node.name])
    config = nats_config(ctx.topo, node_pki(ctx.topo.security, ctx.run_dir, ctx.node.name),
                         cluster)
    if config is not None:
        write_atomic(ctx.run_dir / nats_config_name(ctx.node.name, len(members)), config,
                     PRIVATE_FILE)


def _replicas(whole: LaunchPlan) -> list[Replica]:
    frontends: list[ProcessSpec] = [p for p in whole.processes
                                    if p.kind is ProcessKind.FRONTEND]
    return [Replica(name=p.name, host=p.probed_host, port=p.ports["replica"])
            for p in frontends]


def balancer_tls(topo: Topology, run_dir: Path, node: str) -> BalancerTls | None:
    """The files an HTTPS balancer reads (cluster_tls.py writes the two bundles)."""
    return _balancer_tls(topo, node_pki(topo.security, run_dir, node), run_dir, node)


def _balancer_tls(topo: Topology, paths: PkiPaths | None, run_dir: Path,
                  node: str) -> BalancerTls | None:
    if not topo.frontend_https or paths is None:
        return None
    tls_dir = run_dir / TLS_DIR
    return BalancerTls(server_pem=balancer_pem_path(tls_dir, node), ca_cert=paths.ca_cert,
                       client_pem=client_bundle_path(tls_dir),
                       client_ca=paths.ca_cert if topo.security.tls.frontend_client_certs
                       else None)


def local_balancer_files(topo: Topology, plan: LaunchPlan, run_dir: Path) -> dict[str, str]:
    """A graph on one machine with a balancer: its configuration and hold script, by name in
    the directory haproxy works in (what `up` writes into the graph's own directory,
    write_local_balancer, and `render` into local/ for launch.sh)."""
    spec = next((p for p in plan.processes if p.kind is ProcessKind.BALANCER), None)
    if spec is None:
        return {}
    paths = graph_pki_paths(topo.security, run_dir)
    # haproxy works in the directory of these files (balancer_spec's -C): names relative
    # to it; the TLS files stay the run directory's (absolute).
    settings = BalancerSettings(
        bind_host=topo.frontend.local_host, bind_port=topo.frontend.port, floating=False,
        model_name=topo.model.name, replicas=_replicas(plan), monitor_socket=MONITOR_SOCKET,
        hold_socket=HOLD_SOCKET, hold_script=hold_script_name(LOCAL_NODE),
        tls=_balancer_tls(topo, paths, run_dir, LOCAL_NODE))
    return {hold_script_name(LOCAL_NODE): hold_script_text(),
            balancer_config_name(LOCAL_NODE): haproxy_config(settings)}


def write_local_balancer(topo: Topology, plan: LaunchPlan, run_dir: Path,
                         balancer_dir: Path) -> None:
    """local_balancer_files into `balancer_dir`, the graph's own directory outside the run
    directory where haproxy works (RenderContext.balancer_dir), and over HTTPS the balancer's
    certificate bundles (the graph's own certificates) into the run directory's, as a node's
    agent writes its node's."""
    files = local_balancer_files(topo, plan, run_dir)
    paths = graph_pki_paths(topo.security, run_dir)
    if files and paths is not None and topo.frontend_https:
        write_balancer_bundles(paths, LOCAL_NODE, run_dir)
    for name, text in files.items():
        write_atomic(balancer_dir / name, text, PRIVATE_FILE)


def balancer_settings(ctx: NodeContext) -> BalancerSettings:
    front = ctx.topo.frontend
    floating = front.floating_address
    bind = floating.address if floating else (front.host or ctx.address(ctx.node))
    return BalancerSettings(
        bind_host=bind, bind_port=front.port, floating=floating is not None,
        model_name=ctx.topo.model.name, replicas=_replicas(ctx.whole),
        # haproxy works in the node's data directory (balancer_spec's -C).
        monitor_socket=MONITOR_SOCKET, hold_socket=HOLD_SOCKET,
        hold_script=str(ctx.run_dir / hold_script_name(ctx.node.name)),
        tls=balancer_tls(ctx.topo, ctx.run_dir, ctx.node.name))


def interface_of(address: str) -> str:
    """The network interface that holds `address` on this node (`ip -o -4 addr`)."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         check=False, timeout=10).stdout
    for line in out.splitlines():
        words = line.split()
        if len(words) > 3 and words[3].split("/")[0] == address:
            return words[1]
    raise RuntimeError(f"no interface of this node holds {address}")


def vrrp_settings(ctx: NodeContext) -> VrrpSettings:
    floating = ctx.topo.frontend.floating_address
    assert floating is not None
    own = ctx.address(ctx.node)
    return VrrpSettings(
        instance=ctx.topo.namespace, router_id=floating.router_id,
        interface=floating.interface or interface_of(own), address=own,
        peers=[ctx.address(n) for n in ctx.nodes_running(ProcessKind.VRRP)
               if n.name != ctx.node.name],
        first=ctx.node.head,  # the first frontend node (service_slots spread from the head)
        floating_address=floating.address, monitor_socket=str(ctx.data_dir / MONITOR_SOCKET),
        bid_file=str(ctx.data_dir / BID_FILE),
        curl=shutil.which("curl") or "/usr/bin/curl")
