"""Placement `hosts` -> one bash script per node (`node-<name>.sh`) and a README.

Each script starts its node's processes with the node's own address, etcd and NATS
endpoints on the head node, CUDA_VISIBLE_DEVICES per worker; waits for each to be ready
(workers first wait for etcd and NATS on the head); and stops them all, in reverse order, on
SIGTERM, Ctrl-C or when one exits. Pure: text out.
"""

from __future__ import annotations

from ..placement import node_layout
from ..topology import Backend, KvInterconnect, NatsAuth, Topology
from .cluster_plan import (
    ClusterContext,
    ClusterPlan,
    NodeProcesses,
    render_cluster_plan,
)
from .launch_plan import (
    NATS_CONFIG,
    NATS_TOKEN_ENV,
    ProcessSpec,
    nats_token_config,
)
from .shell_words import (
    checkpoint_check,
    command_words,
    comment,
    echo_line,
    pid_line,
    private_files_lines,
    readable,
    runtime,
    runtime_names,
    stop_function,
    wait_line,
    wait_ready_function,
    word,
)

RUN_DIR = runtime("RUN_DIR")
# Without placement.hosts the scripts take the addresses from the environment they run in.
HEAD_ADDRESS = "HEAD_ADDRESS"
NODE_ADDRESS = "NODE_ADDRESS"


def render_hosts_plan(topo: Topology) -> ClusterPlan:
    hosts = topo.placement.hosts
    if hosts is not None:
        addresses = [n.address for n in hosts.nodes]
    else:
        addresses = [runtime(HEAD_ADDRESS if node.head else NODE_ADDRESS)
                     for node in node_layout(topo)]
    return render_cluster_plan(topo, ClusterContext(run_dir=RUN_DIR, node_addresses=addresses))


def _required_lines(node: NodeProcesses, plan: ClusterPlan) -> list[str]:
    """Stop at once, with the fix, when an address the script needs is not set."""
    values = [v for spec in node.processes for v in (*spec.argv, *spec.env.values())]
    if not node.head:
        values += [str(s.readiness.url or s.readiness.host) for s in plan.head.processes]
    return [f': "${{{name}:?set {name} to the cluster address of the '
            + ("head node" if name == HEAD_ADDRESS else "node this script runs on") + '}"'
            for name in runtime_names(values) if name != "RUN_DIR"]


def token_lines(auth: NatsAuth | None) -> list[str]:
    """Read the NATS token where the script runs; it is never written into any file."""
    if auth is None:
        return []
    if auth.token_file is not None:
        source = f"$(cat {word(auth.token_file)})"
    else:
        source = f"${{{auth.token_env}:?set {auth.token_env} to the NATS token}}"
    return [f'{NATS_TOKEN_ENV}="{source}"', f"export {NATS_TOKEN_ENV}"]


def nats_config_lines() -> list[str]:
    """The NATS server's config: the token comes from the server's environment."""
    config = nats_token_config().rstrip("\n")
    return [f"printf '%s\\n' {word(config)} > {word(RUN_DIR + '/' + NATS_CONFIG)}"]


def _start_lines(spec: ProcessSpec) -> list[str]:
    gpus = f" (GPUs {','.join(map(str, spec.gpus))})" if spec.gpus else ""
    return ["", f"# {spec.name}{gpus}",
            f"{command_words(spec)} >\"$LOGS/{spec.name}.log\" 2>&1 &",
            pid_line(spec)]


def _process_lines(processes: list[ProcessSpec]) -> list[str]:
    """etcd and NATS one after the other (Dynamo needs them up); then the frontend and the
    workers together, which find each other through etcd whenever they come up."""
    lines: list[str] = []
    infra = [p for p in processes if p.kind.is_coordination]
    dynamo = [p for p in processes if p not in infra]
    for spec in infra:
        lines += [*_start_lines(spec), wait_line(spec)]
    for spec in dynamo:
        lines += _start_lines(spec)
    if dynamo:
        lines += ["", *(wait_line(spec) for spec in dynamo)]
    return lines


def _head_waits(plan: ClusterPlan) -> list[str]:
    """On the other nodes: wait until etcd and NATS on the head answer."""
    return ["", "# etcd and NATS run on the head node: start its script first"] + [
        wait_line(spec) for spec in plan.head.processes if spec.kind.is_coordination]


def _worker_node_checks(topo: Topology, node: NodeProcesses) -> list[str]:
    """Before this node's TensorRT-LLM workers start: the checkpoint is where model.path
    says, and memory may be locked (UCX and NIXL pin the KV-cache buffers they send;
    NVIDIA runs TRT-LLM containers with `--ulimit memlock=-1`)."""
    if topo.backend is not Backend.TRTLLM or not any(p.role for p in node.processes):
        return []
    lines = ["", "# before the workers start"]
    if (path := topo.model.path) is not None:
        problem = (f"node {node.name}: model.path {path} has no config.json or no "
                   "*.safetensors weights; put the checkpoint on storage every node mounts")
        lines.append(f"{checkpoint_check(path)} || "
                     f"{{ echo {word(problem)} >&2; exit 1; }}")
    rdma = topo.placement.interconnect is KvInterconnect.RDMA
    lines.append('if [ "$(ulimit -l)" != unlimited ]; then echo '
                 + word(f"node {node.name}: locked memory is limited to ") + '"$(ulimit -l)"'
                 + word(" KiB; UCX/NIXL pin KV-cache buffers: raise it (ulimit -l "
                               "unlimited, or memlock in /etc/security/limits.conf)")
                 + " >&2" + ("; exit 1" if rdma else "") + "; fi")
    return lines


def render_node_script(topo: Topology, plan: ClusterPlan, node: NodeProcesses) -> str:
    names = ", ".join(p.name for p in node.processes) or "nothing"
    lines = [
        "#!/usr/bin/env bash",
        f"# Generated by dis-serve from topology {comment(topo.name)} (placement: hosts). "
        "Do not edit: re-render instead.",
        f"# Node {comment(node.name)} at {comment(node.address)}"
        + (" (head)" if node.head else "") + f": {names}.",
        "set -euo pipefail",
        *private_files_lines(),
        'RUN_DIR="${DIS_SERVE_RUN_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"',
        'LOGS="$RUN_DIR/logs"',
        'mkdir -p "$LOGS"',
        *_required_lines(node, plan),
        *token_lines(topo.coordination.nats.auth),
        *stop_function(),
        *wait_ready_function(),
    ]
    if plan.needs_model_card:
        lines.append(f"# The mocker reads a tokenizer-only model card at "
                     f"{comment(plan.model_path)} "
                     "(`dis-serve up` makes one; copy it there).")
    if node.head and topo.coordination.nats.auth is not None:
        lines += nats_config_lines()
    if not node.head:
        lines += _head_waits(plan)
    lines += _worker_node_checks(topo, node)
    lines += _process_lines(node.processes)
    if node.head:
        lines += ["", echo_line(f"serving {plan.model_name} at {plan.endpoint}/v1 "
                                "(Ctrl-C or SIGTERM stops this node)")]
    else:
        lines += ["", echo_line(f"node {node.name} ready (Ctrl-C or SIGTERM stops this node)")]
    lines += ["wait -n", ""]
    return "\n".join(lines)


def render_readme(topo: Topology, plan: ClusterPlan) -> str:
    head = plan.head
    others = [n for n in plan.nodes if not n.head]
    lines = [
        f"# {topo.name}: one script per node (placement: hosts)",
        "",
        "Copy this directory to the same path on every node (or set DIS_SERVE_RUN_DIR to",
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
        "The other nodes wait for etcd and NATS on the head node, so after the first you may",
        "start them in any order, at once. Each script waits until its processes are ready.",
        f"The OpenAI endpoint is {readable(plan.endpoint)}/v1 once every worker has "
        "registered.",
        "",
        "Stop: Ctrl-C or `kill -TERM` each script (workers first, the head node last).",
    ]
    if topo.placement.hosts is None:
        lines += ["", "placement.hosts is not set, so the scripts take addresses from the "
                      f"environment: {HEAD_ADDRESS} (the head node's cluster address) for "
                      f"every script and {NODE_ADDRESS} (the node's own) for the others."]
    auth = topo.coordination.nats.auth
    if auth is not None:
        where = (f"the file {auth.token_file}" if auth.token_file
                 else f"the environment variable {auth.token_env}")
        lines += ["", f"NATS requires a token: every script reads it from {where} on its "
                      "node; it is never written into these files."]
    if plan.needs_model_card:
        lines += ["", "The mocker reads a tokenizer-only model card at "
                      f"{readable(plan.model_path)} (`dis-serve up` makes one)."]
    return "\n".join(lines) + "\n"


def render_hosts_files(topo: Topology) -> dict[str, str]:
    """`node-<name>.sh` for every node and the README, relative to the hosts directory."""
    plan = render_hosts_plan(topo)
    files = {f"node-{node.name}.sh": render_node_script(topo, plan, node)
             for node in plan.nodes}
    files["README.md"] = render_readme(topo, plan)
    return files
