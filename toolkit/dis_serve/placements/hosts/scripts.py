"""Placement `hosts` -> one bash script per node (`node-<name>.sh`) and a README.

Beside them the cluster plan (`cluster-plan.json`: every node's processes with its own
address, etcd and NATS on the head node, CUDA_VISIBLE_DEVICES per worker) and the topology:
what each node's agent (`dis-serve agent`, launch/agent.py) reads. A script checks the
addresses it needs from its environment and `exec`s the agent, which starts, waits for,
heals and stops the node's processes; no wait, restart or stop logic lives in bash. Pure:
text out.
"""

from __future__ import annotations

from ... import __version__
from ...errors import UserInputError
from ...render.cluster_plan import (
    DATA_DIR_VAR,
    ClusterContext,
    ClusterPlan,
    NodeProcesses,
    render_cluster_plan,
)
from ...render.launch_plan import NATS_TOKEN_ENV
from ...render.node_layout import WorkerSlot, node_layout
from ...render.run_layout import CLUSTER_PLAN_FILE, STOP_REQUEST_FILE
from ...render.shell_words import (
    checkpoint_check,
    comment,
    curl_tls_words,
    memlock_check,
    private_files_lines,
    readable,
    runtime,
    runtime_names,
    word,
)
from ...render.tls_planes import generates_nats_token
from ...topology import KvInterconnect, NatsAuth, Topology
from ...topology.security import TlsMode
from ..cluster.install_check import version_check_lines
from ..cluster.rendering import RunFiles
from ..shared_files import engine_config_files

RUN_DIR = runtime("RUN_DIR")
# What runs each node's agent: the python3 on the node's PATH.
AGENT_PYTHON = "python3"
# Without placement.hosts the scripts take the addresses from the environment they run in.
HEAD_ADDRESS = "HEAD_ADDRESS"
NODE_ADDRESS = "NODE_ADDRESS"


def render_hosts_plan(topo: Topology, slots: list[WorkerSlot] | None = None) -> ClusterPlan:
    """`slots`: the workers (default: those `up` starts)."""
    hosts = topo.placement.hosts
    if hosts is not None:
        addresses = [n.address for n in hosts.nodes]
    else:
        topo = services_on_the_head(topo)
        addresses = [runtime(HEAD_ADDRESS if node.head else NODE_ADDRESS)
                     for node in node_layout(topo)]
    return render_cluster_plan(topo, ClusterContext(run_dir=RUN_DIR, node_addresses=addresses),
                               slots)


def services_on_the_head(topo: Topology) -> Topology:
    """A graph whose node scripts learn only their own and the head's address (no
    placement.hosts): every service on the head, as nothing else can find another node's
    member. UserInputError when the topology asks for more."""
    coord = topo.coordination
    asked = [key for key, value in (("frontend.replicas", topo.frontend.replicas),
                                    ("coordination.etcd.members", coord.etcd.members),
                                    ("coordination.nats.members", coord.nats.members))
             if value is not None and value > 1]
    if asked:
        raise UserInputError(f"{asked[0]} is above 1, but the hosts scripts of a graph without "
                             "placement.hosts learn only their own and the head's address",
                             key=asked[0], fix="list every node's address in placement.hosts")
    data = topo.model_dump(mode="json", exclude_unset=True)
    data["frontend"] = {**data.get("frontend", {}), "replicas": 1}
    data["coordination"] = {**data.get("coordination", {})}
    for plane in ("etcd", "nats"):
        data["coordination"][plane] = {**data["coordination"].get(plane, {}), "members": 1}
    return Topology.model_validate(data)


def _required_names(node: NodeProcesses, plan: ClusterPlan) -> list[str]:
    """The run-time addresses this node's processes (and, off the head, the head's probes)
    need from the environment."""
    values = [v for spec in node.processes for v in (*spec.argv, *spec.env.values())]
    values += [str(s.readiness.url or s.readiness.host) for s in plan.head.processes]
    # The run directory and the data directory are the agent's to set, not the user's.
    return [name for name in runtime_names(values) if name not in ("RUN_DIR", DATA_DIR_VAR)]


def _required_lines(names: list[str]) -> list[str]:
    """Stop at once, with the fix, when an address the node needs is not set; export it for
    the agent."""
    lines = [f': "${{{name}:?set {name} to the cluster address of the '
             + ("head node" if name == HEAD_ADDRESS else "node this script runs on") + '}"'
             for name in names]
    return lines + ([f"export {' '.join(names)}"] if names else [])


def token_lines(auth: NatsAuth | None) -> list[str]:
    """Read the NATS token where the script runs; it is never written into any file."""
    if auth is None:
        return []
    if auth.token_file is not None:
        source = f"$(cat {word(auth.token_file)})"
    else:
        source = f"${{{auth.token_env}:?set {auth.token_env} to the NATS token}}"
    return [f'{NATS_TOKEN_ENV}="{source}"', f"export {NATS_TOKEN_ENV}"]


def _worker_node_checks(topo: Topology, node: NodeProcesses) -> list[str]:
    """Before this node's GPU workers (TensorRT-LLM) start: the checkpoint is where
    model.path says, and memory may be locked (UCX and NIXL pin the KV-cache buffers they
    send; NVIDIA runs TRT-LLM containers with `--ulimit memlock=-1`)."""
    if not topo.backend.needs_gpu or not any(p.role for p in node.processes):
        return []
    lines = ["", "# before the workers start"]
    if (path := topo.model.path) is not None:
        problem = (f"node {node.name}: model.path {path} has no config.json or no "
                   "*.safetensors weights; put the checkpoint on storage every node mounts")
        lines.append(f"{checkpoint_check(path)} || "
                     f"{{ echo {word(problem)} >&2; exit 1; }}")
    rdma = topo.placement.interconnect is KvInterconnect.RDMA
    lines.append(memlock_check(f"node {node.name}", "raise it (ulimit -l unlimited, or "
                               "memlock in /etc/security/limits.conf)", fatal=rdma))
    return lines


def render_node_script(topo: Topology, plan: ClusterPlan, node: NodeProcesses) -> str:
    """Checks what the node needs from its environment, then hands over to the node's agent
    (`dis-serve agent`), which starts, waits for, heals and stops its processes."""
    names = ", ".join(p.name for p in node.processes) or "nothing"
    required = _required_names(node, plan)
    lines = [
        "#!/usr/bin/env bash",
        f"# Generated by dis-serve from topology {comment(topo.name)} (placement: hosts). "
        "Do not edit: re-render instead.",
        f"# Node {comment(node.name)} at {comment(node.address)}"
        + (" (head)" if node.head else "") + f": {names}.",
        "set -euo pipefail",
        *private_files_lines(),
        'RUN_DIR="${DIS_SERVE_RUN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"',
        *_required_lines(required),
        *token_lines(topo.coordination.nats.auth),
        f"# dis-serve on this node: {AGENT_PYTHON} on the PATH runs the agent; it must import "
        f"the dis-serve {__version__} that rendered this script.",
        *version_check_lines(AGENT_PYTHON, f"node {node.name}"),
    ]
    lines += _worker_node_checks(topo, node)
    lines += [
        "# The agent reads cluster-plan.json and topology.json beside this script, makes the",
        "# mocker's model card if it is missing, and stops this node's processes in order on",
        "# Ctrl-C or SIGTERM." + ("" if node.head else " It first waits for etcd and NATS on "
                                                      "the head node."),
        f"exec {AGENT_PYTHON} -m dis_serve agent --node {word(node.name)} \"$RUN_DIR\"",
        "",
    ]
    return "\n".join(lines)


def _agent_lines() -> list[str]:
    return [f"Each script runs `{AGENT_PYTHON} -m dis_serve agent`: dis-serve {__version__} "
            "(the version that",
            f"rendered these files) must be installed for the {AGENT_PYTHON} on every node's "
            "PATH; a script",
            "stops in one line where it is not. An agent whose node runs no etcd member waits "
            "for one",
            "on the others, so you may start every script at once; each agent restarts its",
            "node's processes when they crash and writes its view to state-<node>.json."]


def render_readme(topo: Topology, plan: ClusterPlan) -> str:
    head = plan.head
    others = [n for n in plan.nodes if not n.head]
    lines = [
        f"# {topo.name}: one script per node (placement: hosts)",
        "",
        "`dis-serve prepare TOPOLOGY` writes this directory as a run directory",
        f"(.dis-serve/runs/{topo.name}, the mocker's model card included) and prints these steps;",
        "`dis-serve render --target hosts` writes the same files anywhere. Copy it to the same",
        "path on every node, or put it on storage they all mount (or set DIS_SERVE_RUN_DIR to",
        "where it is). Logs go to logs/ beside the scripts.",
        "",
        "Run them in this order, each on its own node:",
        "",
        f"1. `./node-{head.name}.sh` on {head.name} ({readable(head.address)}): "
        + ", ".join(p.name for p in head.processes),
    ]
    for i, node in enumerate(others, start=2):
        lines.append(f"{i}. `./node-{node.name}.sh` on {node.name} ({readable(node.address)}): "
                     + (", ".join(p.name for p in node.processes) or "nothing"))
    lines += [
        "",
        *_agent_lines(),
        f"The OpenAI endpoint is {readable(plan.endpoint)}/v1 once every worker has "
        "registered.",
        "",
        f"Watch: `dis-serve status {topo.name}` (every node's processes, from the agents'",
        f"state files and heartbeats), `dis-serve logs --name {topo.name}`,",
        f"`dis-serve doctor {topo.name}`, `dis-serve fault {topo.name} --node NODE`: from a",
        "machine that sees this directory.",
        "",
        f"Stop: `dis-serve down {topo.name}` where the directory is shared (it writes",
        f"{STOP_REQUEST_FILE}; each agent stops its node within a second), or Ctrl-C or",
        "`kill -TERM` each script (workers first, the head node last).",
    ]
    if topo.placement.hosts is None:
        lines += ["", "placement.hosts is not set, so the scripts take addresses from the "
                      f"environment: {HEAD_ADDRESS} (the head node's cluster address) for "
                      f"every script and {NODE_ADDRESS} (the node's own) for the others."]
    if topo.security.tls.mode is TlsMode.AUTO:
        token = " and NATS token" if generates_nats_token(topo) else ""
        lines += ["", "etcd, NATS and the request plane are mutual TLS: tls/ holds the graph's "
                      f"CA, client certificate{token} (0600, made by `dis-serve render`); copy "
                      "it with the scripts. Each node's agent signs its own server certificate "
                      "with that CA, for its address, when it starts."]
    lines += _endpoint_lines(plan) + _entry_lines(topo)
    auth = topo.coordination.nats.auth
    if auth is not None:
        where = (f"the file {auth.token_file}" if auth.token_file
                 else f"the environment variable {auth.token_env}")
        lines += ["", f"NATS requires a token: every script reads it from {where} on its "
                      "node; it is never written into these files."]
    if plan.needs_model_card:
        lines += ["", "The mocker reads a tokenizer-only model card at "
                      f"{readable(plan.model_path)}: `dis-serve prepare` writes it, and "
                      "each node's agent makes it there if it is missing."]
    return "\n".join(lines) + "\n"


def _entry_lines(topo: Topology) -> list[str]:
    """What the frontends' one address needs of the nodes that run them."""
    if not topo.frontend.balancer:
        return []
    if topo.frontend_replicas < 2:
        return ["", "The frontend runs behind a load balancer on the head node (haproxy: "
                    "installed there, on PATH or in /usr/sbin), which holds requests while "
                    "the frontend restarts; frontend.balancer: false does without it."]
    lines = ["", f"{topo.frontend_replicas} frontends run behind a load balancer on each of "
                 "their nodes (haproxy: installed on them, on PATH or in /usr/sbin)."]
    floating = topo.frontend.floating_address
    if floating is not None:
        lines.append(f"The address clients use, {floating.address}, moves between those nodes "
                     "(keepalived's VRRP, installed too): their agents must run as root (it "
                     "adds the address to an interface and sends VRRP), and the network must "
                     f"let VRRP between them and route {floating.address} to whichever holds "
                     "it.")
    else:
        lines.append("Without frontend.floating_address clients use the head node's balancer, "
                     "which does not survive the head node: set it, or put your own load "
                     "balancer in front of every node's (frontend.balancer_url).")
    return lines


def _endpoint_lines(plan: ClusterPlan) -> list[str]:
    """How to call an HTTPS endpoint: with the graph's CA (curl's own store lacks it) and,
    when the frontend asks for one, its client certificate, from this directory."""
    if plan.endpoint_tls is None:
        return []
    here = plan.endpoint_tls_with({"RUN_DIR": "."})
    assert here is not None
    who = (" and asks every client for a certificate signed by it (tls/client.pem)"
           if here.client_cert else "")
    return ["", f"The frontend serves HTTPS with the graph's CA{who}; from this directory:", "",
            f"    curl -s {curl_tls_words(here)}{readable(plan.endpoint)}/v1/models"]


def hosts_run_files(topo: Topology) -> RunFiles:
    """The run directory as text: what `render` writes and what `prepare` writes, the engine
    configs included."""
    plan = render_hosts_plan(topo)
    return RunFiles(files=render_hosts_files(topo, plan) | engine_config_files(topo, ""),
                    plan=plan)


def render_hosts_files(topo: Topology, plan: ClusterPlan | None = None) -> dict[str, str]:
    """`node-<name>.sh` for every node, the README, the cluster plan and the topology the
    agents read, relative to the hosts directory."""
    plan = plan or render_hosts_plan(topo)
    files = {f"node-{node.name}.sh": render_node_script(topo, plan, node)
             for node in plan.nodes}
    files["README.md"] = render_readme(topo, plan)
    files[CLUSTER_PLAN_FILE] = plan.model_dump_json(indent=2) + "\n"
    files["topology.json"] = topo.model_dump_json(indent=2) + "\n"
    return files
