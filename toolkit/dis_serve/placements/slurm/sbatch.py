"""Placement `slurm` -> one sbatch script for the whole graph.

The job resolves its nodes from the allocation (the first is the head) and each node's
cluster-facing address on the node itself (written to `addresses` in the run directory),
then starts one `dis-serve agent` per node as an `srun` step. The agent runs on the node
itself from the submitting virtual environment (shared storage, like the run directory): a
TensorRT-LLM worker it starts is its own `srun` step of TP MPI ranks inside NVIDIA's
container (placements/slurm/mpi_launch.py), since an srun cannot be started from inside a pyxis
container. The agents do the rest (launch/agent.py): start, wait within the model's startup
budget, heal and stop each node's processes; the head's writes `endpoint` once every worker
is registered. On `scancel --batch --signal=TERM` (`down`) the script makes
`stop-request`, which every agent watches: each stops its node in order (a signal through
Slurm reaches every process of a step at once). At its end the script removes the head's
etcd/NATS data that no agent owns any more (`clear-data`, launch/node_data.py). No wait,
restart or stop logic lives in bash. Pure: text out.
"""

from __future__ import annotations

from ... import __version__
from ...render.cluster_plan import ClusterContext, ClusterPlan, NodeProcesses, render_cluster_plan
from ...render.node_layout import WorkerSlot
from ...render.run_layout import (
    ADDRESSES_FILE,
    CLUSTER_PLAN_FILE,
    ENDPOINT_FILE,
    STARTED_FILE,
    STOP_REQUEST_FILE,
    TOPOLOGY_FILE,
    agent_log_name,
)
from ...render.shell_words import (
    checkpoint_check,
    comment,
    echo_line,
    memlock_check,
    private_files_lines,
    runtime,
    word,
)
from ...topology import KvInterconnect, SlurmPlacement, Topology
from ..cluster.install_check import probe_words, version_check_lines
from ..cluster.rendering import RunContext, RunFiles
from ..hosts.scripts import token_lines
from ..shared_files import engine_config_files
from .mpi_launch import (
    container_image,
    launches_mpi_ranks,
    squashfs_path,
    uses_mpi_launch,
    worker_launch_argv,
)

# The batch script makes STOP_REQUEST_FILE when told to stop: every agent watches for it and
# stops its node in order. Not a signal through Slurm: Slurm signals every process of a step
# at once (the agent's children too), and srun takes its own SIGTERM as "SIGKILL the step".
SCRIPT_FILE = "job.sbatch"
# The batch script's own output, beside the processes' logs (`up` passes it to sbatch).
JOB_LOG = "slurm-%j.log"
# Seconds before the time limit that the batch shell is told to stop the graph.
TIME_LIMIT_NOTICE_S = 60


def node_address_var(index: int) -> str:
    return f"NODE_ADDR_{index}"


def slurm_settings(topo: Topology) -> SlurmPlacement:
    """The topology's Slurm settings, or Slurm's defaults for a graph placed elsewhere."""
    return topo.placement.slurm or SlurmPlacement()


def render_slurm_plan(topo: Topology, *, run_dir: str | None = None,
                      python: str = "python3", etcd_bin: str = "etcd",
                      nats_bin: str = "nats-server", model_path: str | None = None,
                      slots: list[WorkerSlot] | None = None) -> ClusterPlan:
    """`run_dir` None: the directory sbatch was called from (or $DIS_SERVE_RUN_DIR);
    `slots`: the workers (default: those `up` starts)."""
    nodes = len(topo.node_gpus())
    plan = render_cluster_plan(topo, ClusterContext(
        run_dir=run_dir or runtime("RUN_DIR"),
        node_addresses=[runtime(node_address_var(i)) for i in range(nodes)],
        python=python, etcd_bin=etcd_bin, nats_bin=nats_bin, model_path=model_path), slots)
    return _with_mpi_launch(topo, plan, run_dir or runtime("RUN_DIR"))


def node_name_var(index: int) -> str:
    return f"NODE_{index}"


def _with_mpi_launch(topo: Topology, plan: ClusterPlan, run_dir: str) -> ClusterPlan:
    """The plan whose TensorRT-LLM workers the agents start as NVIDIA does: one srun step of
    TP MPI ranks on the worker's node (placements/slurm/mpi_launch.py). Their output is the agent's
    log of that worker (no --output)."""
    def launched(spec):
        if not uses_mpi_launch(topo, spec):
            return spec
        argv = worker_launch_argv(topo, spec, node=runtime(node_name_var(spec.node)),
                                  run_dir=run_dir, log=None)
        return spec.model_copy(update={"argv": argv})

    nodes = [node.model_copy(update={"processes": [launched(p) for p in node.processes]})
             for node in plan.nodes]
    return plan.model_copy(update={"nodes": nodes})


def _sbatch_lines(topo: Topology) -> list[str]:
    slurm = slurm_settings(topo)
    gpus = slurm.gpus_per_node
    if gpus is None and topo.backend.needs_gpu:
        gpus = topo.hardware.gpus_per_node
    ranks = launches_mpi_ranks(topo)
    # Workers of MPI ranks (TensorRT-LLM): a task slot per GPU for the ranks, as srt-slurm's
    # templates/job_script_minimal.j2 asks for trtllm (--ntasks-per-node = GPUs per node).
    tasks = gpus if ranks and gpus else 1
    options = [f"--job-name={slurm.job_name or 'dis-serve-' + topo.name}",
               f"--nodes={len(topo.node_gpus())}", f"--ntasks-per-node={tasks}",
               f"--time={slurm.time_limit}"]
    if slurm.partition:
        options.append(f"--partition={slurm.partition}")
    if slurm.account:
        options.append(f"--account={slurm.account}")
    if gpus:
        options.append(f"--gpus-per-node={gpus}")
    if ranks:
        # Whole nodes: every CPU for the ranks' --cpus-per-task (srt-slurm's
        # job_script_minimal.j2 --exclusive), and all of each node's memory (--mem=0, sbatch's
        # "all memory"), where a per-CPU default would OOM-kill a 70B load.
        options += [o for o in ("--exclusive", "--mem=0") if o not in slurm.sbatch_extra]
    # A lost node must not end the job: the agents on the others keep serving (--no-kill),
    # and Slurm must not requeue it either, which would stop the survivors and start the
    # whole graph again from the queue (--no-requeue), unless sbatch_extra says otherwise.
    options += [option for option, taken in (("--no-kill", ("--no-kill", "-k")),
                                             ("--no-requeue", ("--no-requeue", "--requeue")))
                if not any(extra.startswith(taken) for extra in slurm.sbatch_extra)]
    # At the time limit Slurm signals every process of every step at once (no stop order);
    # SIGTERM to the batch shell alone a minute before lets its trap ask the agents to stop
    # their nodes in order (the stop request), within the 10 s grace and the cross-node wait.
    if not any(o.startswith("--signal") for o in slurm.sbatch_extra):
        options.append(f"--signal=B:TERM@{TIME_LIMIT_NOTICE_S}")
    options += slurm.sbatch_extra
    return [f"#SBATCH {option}" for option in options]


def _srun_words(topo: Topology, node: NodeProcesses) -> str:
    """`srun` for the agent step of one node, on the node itself (not in a container: the
    workers' MPI steps are). The step shares the node's CPUs with the processes it starts
    (--overlap) and sees the node's GPUs (CUDA_VISIBLE_DEVICES picks each worker's, as on the
    hosts target); a node without workers takes no GPU."""
    words = ["srun", "--nodes=1", "--ntasks=1", f'--nodelist="${{NODES[{node.index}]}}"',
             f"--job-name={word('agent-' + node.name)}",
             f'--output="$LOGS/{agent_log_name(node.name)}.log"', "--overlap"]
    if topo.backend.needs_gpu and not any(spec.gpus for spec in node.processes):
        words.append("--gres=none")
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
        lines.append(f'{var}="$(node_address "${{NODES[{i}]}}")"')
        check = f'[ -n "${{{var}}}" ]'
        if nodes > 1:
            check += f' && [[ "${{{var}}}" != 127.* ]]'
        where = f"interface {interface}" if interface else "its host name"
        lines.append(f'{node_name_var(i)}="${{NODES[{i}]}}"')
        message = echo_line(f"node {runtime(node_name_var(i))}: no cluster address from {where} "
                            f"(got [{runtime(var)}]); set placement.slurm.interface",
                            stream=">&2")
        lines.append(f"{check} || {{ {message}; exit 1; }}")
    # The agents read both: the address each process binds and the node a worker's MPI
    # step runs on.
    lines.append("{ " + " ".join(f"echo \"{var}=${{{var}}}\";" for i in range(nodes)
                                for var in (node_address_var(i), node_name_var(i)))
                 + f' }} > "$RUN_DIR/{ADDRESSES_FILE}"')
    return lines


# On one node, under the cache's lock: import the registry image unless its .sqsh is there
# (a part file moved into place, so a failed import leaves none).
IMPORT_IMAGE = ('exec 9>>"$1.lock" && flock 9 && { [ -s "$1" ] || { enroot import -o "$1.part" '
                '"docker://$2" && mv -f "$1.part" "$1"; }; }')


def _image_lines(topo: Topology, run_dir: str) -> list[str]:
    """Before any step runs in the image: its .sqsh, made once on shared storage
    (`enroot import`) and kept for every step, restart and later job."""
    sqsh = squashfs_path(topo, run_dir)
    image = container_image(topo)
    if sqsh is None or image is None:
        return []
    problem = word(f"could not import {image} into {sqsh} (enroot import); import it by "
                   "hand, or set placement.slurm.container_image to a .sqsh")
    return ["", "# The image, imported once into a .sqsh every step runs (as srt-slurm's "
                "recipes run theirs)",
            f"mkdir -p {word(sqsh.rsplit('/', 1)[0])}",
            f'srun --overlap --nodes=1 --ntasks=1 --gres=none --nodelist="${{{node_name_var(0)}}}" '
            f"bash -c {word(IMPORT_IMAGE)} import-image {word(sqsh)} {word(image)} || "
            f"{{ echo {problem} >&2; exit 1; }}"]


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
        lines.append(f'srun --overlap --nodes=1 --ntasks=1 --gres=none --nodelist="{node}" '
                     f'bash -c {word(checkpoint_check(path))} || '
                     f'{{ echo "node {node}:" {problem} >&2; exit 1; }}')
    return lines


def _memlock_lines(topo: Topology, plan: ClusterPlan) -> list[str]:
    """Before the GPU workers start: the locked-memory check every target runs
    (shell_words.memlock_check), as a step on each worker node, since steps get the limits
    Slurm propagates from the submitting shell; a hard stop with RDMA."""
    if not topo.backend.needs_gpu:
        return []
    names = {node.index: node.name for node in plan.nodes}
    nodes = sorted({p.node for node in plan.nodes for p in node.processes if p.role})
    rdma = topo.placement.interconnect is KvInterconnect.RDMA
    fix = ("raise the limit steps get (ulimit -l unlimited before sbatch, which Slurm "
           "propagates, or memlock in the nodes' limits.conf and slurmd's LimitMEMLOCK)")
    lines = ["", "# locked memory on each worker node, as its steps get it"]
    for i in nodes:
        check = memlock_check(f"node {names[i]}", fix, fatal=rdma)
        lines.append(f'srun --overlap --nodes=1 --ntasks=1 --gres=none '
                     f'--nodelist="${{{node_name_var(i)}}}" sh -c {word(check)}')
    return lines


def _agent_lines(topo: Topology, plan: ClusterPlan, python: str) -> list[str]:
    """One agent per node (`dis-serve agent`), which starts, waits for, heals and stops that
    node's processes; this script only starts them and passes scancel's SIGTERM on."""
    lines = ["", "AGENTS=()"]
    for node in plan.nodes:
        names = ", ".join(p.name for p in node.processes) or "nothing"
        lines.append(f"# {node.name}: {names}")
        lines += [f"#   {p.name}, as its agent starts it: "
                  + comment(" ".join(word(w) for w in p.argv))
                  for p in node.processes if uses_mpi_launch(topo, p)]
        lines += [
                  f"{_srun_words(topo, node)} {word(python)} -m dis_serve "
                  f"agent --node {word(node.name)} \"$RUN_DIR\" &",
                  "AGENTS+=($!)"]
    lines += [
        "",
        "# scancel --batch --signal=TERM (dis-serve down) or the time limit (--signal=B:TERM): "
        "each agent stops its node in order.",
        f"# The agents see {STOP_REQUEST_FILE} in the run directory. No signal: Slurm would "
        "send it to every",
        "# process of a step at once, and srun answers its own SIGTERM with SIGKILL to its "
        "step.",
        f'stop_agents() {{ trap - TERM INT; touch "$RUN_DIR/{STOP_REQUEST_FILE}"; wait; }}',
        "trap stop_agents TERM INT",
        "# At the job's end (this shell runs on the head node): etcd's and NATS's data, unless "
        "an agent",
        "# still owns it (one whose keeper was killed leaves it behind).",
        f'clear_data() {{ {word(python)} -m dis_serve clear-data "$RUN_DIR" || true; }}',
        "trap clear_data EXIT",
        echo_line(f"agents started on {len(plan.nodes)} nodes; {plan.endpoint} once "
                  f"{ENDPOINT_FILE} in the run directory exists"),
        "# The job runs while any agent does: a node whose agent stopped leaves the graph "
        "degraded, not gone.",
        "wait",
    ]
    return lines


def _dis_serve_lines(python: str) -> list[str]:
    """Every node runs its agent as `PYTHON -m dis_serve agent`, outside any container: the
    dis-serve that rendered this script must be what PYTHON imports there."""
    probe = ('srun --overlap --nodes=1 --ntasks=1 --gres=none --nodelist="$NODE" '
             + probe_words(python))
    return ["",
            f"# dis-serve on the nodes: each agent runs {comment(python)} -m dis_serve on its "
            "node (not in a container), from a virtual",
            "# environment on storage every node mounts (as `dis-serve up` submits) or "
            f"dis-serve {comment(__version__)} installed on each node.",
            'for NODE in "${NODES[@]}"; do',
            *(f"  {line}" for line in version_check_lines(
                python, f"node {runtime('NODE')}", probe)),
            "done"]


def slurm_run_files(topo: Topology, ctx: RunContext) -> RunFiles:
    """The job's run directory as text: the batch script, the cluster plan and topology its
    agents read, the engine configs; what `render` writes and what `up` submits."""
    kwargs = {"run_dir": ctx.run_dir, "python": ctx.python, "etcd_bin": ctx.etcd_bin,
              "nats_bin": ctx.nats_bin, "model_path": ctx.model_path}
    plan = render_slurm_plan(topo, **kwargs)
    files = {SCRIPT_FILE: render_sbatch_script(topo, **kwargs),
             CLUSTER_PLAN_FILE: plan.model_dump_json(indent=2) + "\n",
             TOPOLOGY_FILE: topo.model_dump_json(indent=2) + "\n",
             **engine_config_files(topo, "")}
    return RunFiles(files=files, plan=plan)


def render_sbatch_script(topo: Topology, *, run_dir: str | None = None,
                         python: str = "python3", etcd_bin: str = "etcd",
                         nats_bin: str = "nats-server", model_path: str | None = None) -> str:
    """The sbatch script. `run_dir` None: the job runs where sbatch was called."""
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
        f'mkdir -p "$LOGS"; rm -f "$RUN_DIR/{ENDPOINT_FILE}" "$RUN_DIR/{ADDRESSES_FILE}" '
        f'"$RUN_DIR/{STOP_REQUEST_FILE}"',
        *token_lines(topo.coordination.nats.auth),
        *_resolve_lines(topo),
    ]
    lines += _dis_serve_lines(python)
    if plan.needs_model_card:
        lines.append("# The mocker reads a tokenizer-only model card at "
                     f"{comment(plan.model_path)} (`dis-serve up` writes it; "
                     "an agent makes it where it is missing).")
    lines += _image_lines(topo, run_dir or runtime("RUN_DIR"))
    lines += _checkpoint_lines(topo, plan)
    lines += _memlock_lines(topo, plan)
    lines += [*_agent_lines(topo, plan, python), ""]
    return "\n".join(lines)
