"""What `render` writes for a multi-node placement (hosts, Slurm) besides its own scripts:
the engine configs, Prometheus with file-based discovery of the nodes, and the graph's CA
(made here, since the nodes may share no storage; each agent signs its node's certificate)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ...render.cluster_plan import ClusterPlan
from ...security.pki_files import TLS_DIR
from ...topology import Topology
from ...topology.security import TlsMode

CA_NOTE = "the graph's CA and client certificate, keys 0600"


def cluster_observability(target: str, plan: ClusterPlan) -> dict[str, str]:
    from ...observe.cluster_targets import render_cluster_observability

    return {f"{target}/observability/{path}": text
            for path, text in render_cluster_observability(plan).items()}


def ca_writer(topo: Topology, target: str) -> Callable[[Path], list[str]] | None:
    """With `security.tls.mode: auto`, what writes a new CA into out_dir/<target>/tls."""
    if topo.security.tls.mode is not TlsMode.AUTO:
        return None

    def write(out_dir: Path) -> list[str]:
        from ...launch.cluster_tls import write_cluster_ca

        write_cluster_ca(topo, out_dir / target)
        return [f"{out_dir / target / TLS_DIR} ({CA_NOTE})"]
    return write


def rendered_by_all(topo: Topology) -> bool:
    """`render --target all` writes the cluster targets only for graphs on several nodes."""
    return topo.placement.kind.multi_node or topo.hardware.nodes > 1
