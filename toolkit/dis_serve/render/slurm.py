"""Placement `slurm` -> one sbatch script for the whole graph.

The job resolves its nodes from the allocation (the first is the head) and each node's
cluster-facing address on the node itself; starts etcd, NATS and the frontend on the head
and each worker as an `srun` step on its node (GPUs per step, container flags when an image
is given); waits until everything is ready; writes the endpoint URL to `endpoint` in the run
directory; and stops every step, frontend first, on scancel, time limit or when one exits.
Pure: text out.
"""

from __future__ import annotations

from ..topology import Backend, SlurmPlacement, Topology
from .cluster_plan import ClusterContext, ClusterPlan, render_cluster_plan
from .hosts import nats_config_lines, token_lines
from .launch_plan import ProcessSpec
from .mpi_launch import (
    PYXIS_FLAGS,
    container_image,
    container_mounts,
    uses_mpi_launch,
    worker_launch_argv,
)
from .shell_words import (
    checkpoint_check,
    command_words,
    comment,
    echo_line,
    pid_line,
    private_files_lines,
    runtime,
    stop_function,
    tcp_check,
    wait_line,
    wait_ready_function,
    word,
)

ENDPOINT_FILE = "endpoint"
# NODE_ADDR_<i>=<address> per line: what `dis-serve up` probes the processes at.
ADDRESSES_FILE = "addresses"
# Unix time the batch script started: submit to this is the scheduler's (and launch's) share.
STARTED_FILE = "job-started"
# The batch script's own output, beside the processes' logs (`up` passes it to sbatch).
JOB_LOG = "slurm-%j.log"


def node_address_var(index: int) -> str:
    return f"NODE_ADDR_{index}"


def node_name_var(index: int) -> str:
    return f"NODE_{index}"


def slurm_settings(topo: Topology) -> SlurmPlacement:
    """The topology's Slurm settings, or Slurm's defaults for a graph placed elsewhere."""
    return topo.placement.slurm or SlurmPlacement()


def render_slurm_plan(topo: Topology, *, run_dir: str | None = None,
                      python: str = "python3", etcd_bin: str = "etcd",
                      nats_bin: str = "nats-server", model_path: str | None = None) -> ClusterPlan:
    """`run_dir` None: the directory sbatch was called from (or $DIS_SERVE_RUN_DIR)."""
    nodes = len(topo.node_gpus())
    return render_cluster_plan(topo, ClusterContext(
        run_dir=run_dir or runtime("RUN_DIR"),
        node_addresses=[runtime(node_address_var(i)) for i in range(nodes)],
        python=python, etcd_bin=etcd_bin, nats_bin=nats_bin, model_path=model_path))


def _sbatch_lines(topo: Topology) -> list[str]:
    slurm = slurm_settings(topo)
    gpus = slurm.gpus_per_node
    if gpus is None and topo.backend.needs_gpu:
        gpus = topo.hardware.gpus_per_node
    trtllm = topo.backend is Backend.TRTLLM
    # TensorRT-LLM: a task slot per GPU for the workers' MPI ranks, as srt-slurm's
    # templates/job_script_minimal.j2 asks for trtllm (--ntasks-per-node = GPUs per node).
    tasks = gpus if trtllm and gpus else 1
    options = [f"--job-name={slurm.job_name or 'dis-serve-' + topo.name}",
               f"--nodes={len(topo.node_gpus())}", f"--ntasks-per-node={tasks}",
               f"--time={slurm.time_limit}"]
    if slurm.partition:
        options.append(f"--partition={slurm.partition}")
    if slurm.account:
        options.append(f"--account={slurm.account}")
    if gpus:
        options.append(f"--gpus-per-node={gpus}")
    if trtllm:
        # Whole nodes: every CPU for the ranks' --cpus-per-task (srt-slurm's
        # job_script_minimal.j2 --exclusive), and all of each node's memory (--mem=0, sbatch's
        # "all memory"), where a per-CPU default would OOM-kill a 70B load.
        options += [o for o in ("--exclusive", "--mem=0") if o not in slurm.sbatch_extra]
    options += slurm.sbatch_extra
    return [f"#SBATCH {option}" for option in options]


def _srun_words(topo: Topology, spec: ProcessSpec) -> str:
    """`srun` for one step on its node. Every step shares the node's CPUs with the others
    (--overlap): a GPU worker sees the job's GPUs on its node and CUDA_VISIBLE_DEVICES picks
    its own, as on the hosts target, so no step waits for CPUs another holds; etcd, NATS and
    the frontend take no GPU (--gres=none)."""
    words = ["srun", "--nodes=1", "--ntasks=1", f'--nodelist="${{NODES[{spec.node}]}}"',
             f"--job-name={word(spec.name)}", f'--output="$LOGS/{spec.name}.log"',
             "--overlap"]
    if topo.backend.needs_gpu and not spec.gpus:
        words.append("--gres=none")
    if (image := container_image(topo)) is not None:
        mounts = container_mounts(topo, runtime("RUN_DIR"))
        words += [word(f"--container-image={image}"), *PYXIS_FLAGS,
                  word(f"--container-mounts={','.join(mounts)}")]
    return " ".join(words)


def _resolve_lines(topo: Topology) -> list[str]:
    """The allocation's nodes, and each node's address as that node sees it."""
    nodes = len(topo.node_gpus())
    interface = slurm_settings(topo).interface
    if interface:
        resolve = (f"ip -4 -o addr show dev {word(interface)} | "
                   "awk '{split($4, a, \"/\"); print a[1]; exit}'")
    else:
        resolve = "getent ahostsv4 \"$(hostname)\" | awk '{print $1; exit}'"
    lines = [
        'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")',
        f'if [ "${{#NODES[@]}}" -lt {nodes} ]; then',
        f'  echo "this graph needs {nodes} nodes, the job has ${{#NODES[@]}}" >&2; exit 1',
        "fi",
        "node_address() {  # NODE: its cluster-facing address, resolved on the node itself",
        f"  srun --nodes=1 --ntasks=1 --overlap --nodelist=\"$1\" bash -c {word(resolve)}",
        "}",
    ]
    for i in range(nodes):
        var = node_address_var(i)
        lines.append(f'{node_name_var(i)}="${{NODES[{i}]}}"')
        lines.append(f'{var}="$(node_address "${{NODES[{i}]}}")"')
        check = f'[ -n "${{{var}}}" ]'
        if nodes > 1:
            check += f' && [[ "${{{var}}}" != 127.* ]]'
        where = f"interface {interface}" if interface else "its host name"
        lines.append(f'NODE_{i}="${{NODES[{i}]}}"')
        message = echo_line(f"node {runtime(f'NODE_{i}')}: no cluster address from {where} "
                            f"(got [{runtime(var)}]); set placement.slurm.interface",
                            stream=">&2")
        lines.append(f"{check} || {{ {message}; exit 1; }}")
    lines.append("{ " + " ".join(f"echo \"{node_address_var(i)}=${{{node_address_var(i)}}}\";"
                                for i in range(nodes))
                 + f' }} > "$RUN_DIR/{ADDRESSES_FILE}"')
    return lines


def _checkpoint_lines(topo: Topology, plan: ClusterPlan) -> list[str]:
    """Before anything starts: model.path holds config.json and weights on every worker
    node (shared storage seen the same everywhere), else one line naming node and path."""
    path = topo.model.path
    if path is None:
        return []
    nodes = sorted({p.node for node in plan.nodes for p in node.processes if p.role})
    lines = ["", "# model.path on each worker node"]
    for i in nodes:
        node = f"${{{node_name_var(i)}}}"
        problem = word(f"model.path {path} has no config.json or no *.safetensors "
                       "weights; put the checkpoint on storage every node mounts")
        lines.append(f'srun --overlap --nodes=1 --ntasks=1 --gres=none --nodelist="{node}" bash -c '
                     f'{word(checkpoint_check(path))} || '
                     f'{{ echo "node {node}:" {problem} >&2; exit 1; }}')
    return lines


def _worker_line(topo: Topology, spec: ProcessSpec) -> str:
    if uses_mpi_launch(topo, spec):
        argv = worker_launch_argv(topo, spec, node=runtime(node_name_var(spec.node)),
                                  run_dir=runtime("RUN_DIR"),
                                  log=f"{runtime('LOGS')}/{spec.name}.log")
        return " ".join(word(w) for w in argv) + " &"
    return f"{_srun_words(topo, spec)} {command_words(spec)} &"


def _step_lines(topo: Topology, plan: ClusterPlan) -> list[str]:
    processes = [p for node in plan.nodes for p in node.processes]
    infra = [p for p in processes if p.kind.is_coordination]
    dynamo = [p for p in processes if p not in infra]
    lines: list[str] = []
    for spec in infra:
        lines += ["", f"# {spec.name} on the head node",
                  f"{_srun_words(topo, spec)} {command_words(spec)} &", pid_line(spec)]
    # Dynamo needs etcd and NATS to accept connections, not etcd's election to be over.
    lines += [wait_line(spec, tcp_check(plan.head.address, spec.ports["client"]))
              for spec in infra]
    for spec in dynamo:
        where = f"node {spec.node}" + (f", {len(spec.gpus)} GPUs" if spec.gpus else "")
        if uses_mpi_launch(topo, spec):
            where += f": {len(spec.gpus)} MPI ranks"
        lines += ["", f"# {spec.name} ({where})", _worker_line(topo, spec), pid_line(spec)]
    lines += ["", *(wait_line(spec) for spec in dynamo)]
    return lines


def render_sbatch_script(topo: Topology, *, run_dir: str | None = None,
                         python: str = "python3", etcd_bin: str = "etcd",
                         nats_bin: str = "nats-server", model_path: str | None = None) -> str:
    """The sbatch script. `run_dir` None: the job runs where sbatch was called."""
    container_image(topo)  # a TensorRT-LLM graph without an image stops here, with the fix
    plan = render_slurm_plan(topo, run_dir=run_dir, python=python, etcd_bin=etcd_bin,
                             nats_bin=nats_bin, model_path=model_path)
    where = (f"RUN_DIR={word(run_dir)}" if run_dir is not None
             else 'RUN_DIR="${DIS_SERVE_RUN_DIR:-$SLURM_SUBMIT_DIR}"')
    lines = [
        "#!/bin/bash",
        *_sbatch_lines(topo),
        f"# Generated by dis-serve from topology {comment(topo.name)} (placement: slurm). "
        "Do not edit: re-render instead.",
        "# Submit with sbatch; the endpoint URL appears in $RUN_DIR/endpoint once ready.",
        "set -euo pipefail",
        *private_files_lines(),
        where,
        f'date +%s.%N > "$RUN_DIR/{STARTED_FILE}"',
        'LOGS="$RUN_DIR/logs"',
        f'mkdir -p "$LOGS"; rm -f "$RUN_DIR/{ENDPOINT_FILE}" "$RUN_DIR/{ADDRESSES_FILE}"',
        *token_lines(topo.coordination.nats.auth),
        *stop_function(),
        *wait_ready_function(),
        *_resolve_lines(topo),
    ]
    if plan.needs_model_card:
        lines.append("# The mocker reads a tokenizer-only model card at "
                     f"{comment(plan.model_path)} (`dis-serve up` makes one).")
    if topo.coordination.nats.auth is not None:
        lines += nats_config_lines()
    lines += _checkpoint_lines(topo, plan)
    lines += _step_lines(topo, plan)
    lines += [
        "",
        f"{echo_line(plan.endpoint)} > \"$RUN_DIR/{ENDPOINT_FILE}\"",
        echo_line(f"serving {plan.model_name} at {plan.endpoint}/v1"),
        "wait -n",
        "",
    ]
    return "\n".join(lines)
