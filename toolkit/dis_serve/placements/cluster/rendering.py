"""A multi-node placement's run files (hosts, Slurm), made one way for `render` and for the
run directory `up` or `prepare` writes: the scripts, cluster plan, topology and engine
configs as text (`RunFiles`), and what is made when written (`write_inputs`): the graph's CA
(a new one each time; each agent signs its node's certificate with it) and the mocker's
model card (`up` and `prepare`; the agents make it where `render` left it out). Beside them
for `render`: Prometheus with file-based discovery of the nodes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...render.cluster_plan import ClusterPlan
from ...render.shell_words import resolve_runtime
from ...security.pki_files import TLS_DIR
from ...topology import Topology
from ...topology.security import TlsMode

CA_NOTE = "the graph's CA and client certificate, keys 0600"
CARD_NOTE = "the mocker's tokenizer-only model card"


@dataclass(frozen=True)
class RunContext:
    """Where the files run. `render`'s defaults: the directory the scripts run in, and the
    nodes' own `python3`, `etcd` and `nats-server` on their PATH; `up` names the run
    directory on shared storage and this virtual environment's."""

    run_dir: str | None = None
    python: str = "python3"
    etcd_bin: str = "etcd"
    nats_bin: str = "nats-server"
    model_path: str | None = None


@dataclass(frozen=True)
class RunFiles:
    files: dict[str, str]  # relative to the run directory
    plan: ClusterPlan


def write_inputs(topo: Topology, plan: ClusterPlan, directory: Path, *,
                 model_card: bool = True) -> list[str]:
    """The CA (`security.tls.mode: auto`) and, with `model_card`, the model card (where the
    plan reads one: `render` leaves it to the agents, which make it where it is missing)
    into `directory`; each path written, with what it is."""
    from ...launch.cluster_tls import write_cluster_ca
    from ...launch.model_card import write_model_card

    written = []
    if topo.security.tls.mode is TlsMode.AUTO:
        write_cluster_ca(topo, directory)
        written.append(f"{directory / TLS_DIR} ({CA_NOTE})")
    if model_card and plan.needs_model_card:
        card = Path(resolve_runtime(plan.model_path, {"RUN_DIR": str(directory)}))
        write_model_card(card, topo.model.resolved_architecture(), name=topo.model.id)
        written.append(f"{card} ({CARD_NOTE})")
    return written


def under(target: str, files: dict[str, str]) -> dict[str, str]:
    return {f"{target}/{relative}": text for relative, text in files.items()}


def cluster_observability(target: str, plan: ClusterPlan) -> dict[str, str]:
    from ...observe.cluster_targets import render_cluster_observability

    return under(f"{target}/observability", render_cluster_observability(plan))


def rendered_by_all(topo: Topology) -> bool:
    """`render --target all` writes the cluster targets only for graphs on several nodes."""
    return topo.placement.kind.multi_node or topo.hardware.nodes > 1
