"""One TensorRT-LLM worker on Slurm as NVIDIA launches it: one MPI job per worker, TP ranks.

A TP4 worker started as one Slurm task makes TRT-LLM spawn its four ranks itself from inside
the step (MPI_Comm_spawn), which Slurm's PMI refuses (`MPI_ERR_SPAWN`, Dynamo PRs #808/#992;
again with the Open MPI 5 of TRT-LLM 1.3 images, Dynamo #15060). NVIDIA instead starts the
ranks with the step: `srun --mpi=pmix --ntasks=<TP>` and `trtllm-llmapi-launch` in front of
`python3 -m dynamo.trtllm`, so rank 0 serves and ranks 1..TP-1 become its MPI workers
(NVIDIA/srt-slurm src/srtctl/cli/mixins/worker_stage.py `start_endpoint_worker`,
src/srtctl/backends/trtllm.py `get_srun_config` and `build_worker_command`; ai-dynamo/dynamo
examples/backends/trtllm/multinode/srun_disaggregated.sh).

On the hosts target there is no Slurm step and no PMI server, and TRT-LLM's own spawn of its
ranks (mpi4py's MPIPoolExecutor from the one worker process) is the path it takes there; the
hosts scripts keep one `python3 -m dynamo.trtllm` per worker.

Whether an engine's workers launch this way, and under which launcher, is the engine's
(engines/: `mpi_launcher`); the srun around it is this module's.
`worker_launch_argv` is the one home of the worker's launch line: the sbatch script renders
it, and a per-node agent that starts the worker itself runs the same argv. Pure.

Two workers on one node start their launchers at once, and `trtllm-llmapi-launch`'s rank 0
picks its proxy port by probing from 10012 and closing the socket before its leader binds it
(TensorRT-LLM's tensorrt_llm/llmapi/trtllm-llmapi-launch: it exports the port it found and
takes none from its caller), so both can pick one port. `LEADER_GATE` starts one leader at a
time per node, as srt-slurm's `sequential_node_start` does, but only until the leader
listens, not until the worker has loaded its model.
"""

from __future__ import annotations

import re

from ...engines import engine_for
from ...errors import UserInputError
from ...render.launch_plan import ProcessSpec
from ...topology import SlurmPlacement, Topology

# srtctl's SrunConfig for TRT-LLM: mpi="pmix", oversubscribe=True, cpu_bind="verbose,none"
# (backends/trtllm.py); `verbose` only logs each task's mask, left out here.
MPI_FLAGS = ("--mpi=pmix", "--oversubscribe", "--cpu-bind=none")
# Pyxis: do not run the image's entrypoint, do not mount $HOME (srt-slurm core/slurm.py
# `start_srun_process`).
PYXIS_FLAGS = ("--no-container-entrypoint", "--no-container-mount-home")
BARE_METAL = "none"


def pyxis_image(image: str) -> str:
    """An image in the form pyxis imports (registry#repository)."""
    return image.replace("/", "#", 1)


def container_image(topo: Topology) -> str | None:
    """The image every step runs in, None for bare metal. A graph whose engine NVIDIA runs
    from its image (TensorRT-LLM) placed on Slurm must name one (or say `none`): NVIDIA's
    nodes run Dynamo from its image, not from the node's PATH, and Dynamo's
    srun_disaggregated.sh refuses to start without IMAGE. The Slurm script of a graph placed
    elsewhere (`render --target all`) shows the engine's image."""
    engine = engine_for(topo.backend)
    slurm = topo.placement.slurm
    if slurm is None:
        return pyxis_image(engine.image) if engine.runs_in_image else None
    image = slurm.container_image
    if image == BARE_METAL:
        return None
    if image is None and engine.runs_in_image:
        raise UserInputError(
            f"a {engine.title} graph on Slurm runs in a container (NVIDIA's way) and none is "
            "set", key="placement.slurm.container_image",
            fix=f"set it to {pyxis_image(engine.image)} (the job imports it once into a "
                ".sqsh every step runs), to a .sqsh of your own, or to `none` to use the "
                "nodes' own software")
    return image


def is_squashfs(image: str) -> bool:
    """A file enroot made (`enroot import`), not a registry reference to pull."""
    return image.startswith(("/", "./")) or image.endswith(".sqsh")


def squashfs_path(topo: Topology, run_dir: str) -> str | None:
    """Where the job keeps the .sqsh of a registry image, named as `enroot import` names it
    (registry+repository+tag.sqsh); None when the steps run a file already, or no image."""
    image = container_image(topo)
    if image is None or is_squashfs(image):
        return None
    directory = (topo.placement.slurm or SlurmPlacement()).image_cache or f"{run_dir}/images"
    return f"{directory}/{re.sub(r'[/#:]', '+', image)}.sqsh"


def step_image(topo: Topology, run_dir: str) -> str | None:
    """What `--container-image` names in every step: the imported .sqsh, the user's file,
    or None for bare metal."""
    return squashfs_path(topo, run_dir) or container_image(topo)


def container_mounts(topo: Topology, run_dir: str) -> list[str]:
    """SRC:DST entries: the user's, then the run directory and the checkpoint at their own
    paths (engine configs, logs and model.path read the same inside as outside)."""
    mounts = [*(topo.placement.slurm or SlurmPlacement()).container_mounts,
              f"{run_dir}:{run_dir}"]
    if topo.model.path is not None:
        mounts.append(f"{topo.model.path}:{topo.model.path}")
    return mounts


def launches_mpi_ranks(topo: Topology) -> bool:
    """The engine's TP ranks start as tasks of one step, under its MPI launcher."""
    return engine_for(topo.backend).mpi_launcher is not None


# One launcher's rank 0 at a time per node (engines/: `mpi_leader_port_from`): rank 0 takes
# the node's lock, finds the port its launcher is about to pick (the same search, from $2),
# starts the launcher and lets the next leader go once that port listens (or the launcher
# ends, or 120 s pass); other ranks start at once. POSIX sh: it runs in NVIDIA's image.
LEADER_GATE = r"""locks=$1 from=$2; shift 2
[ "${SLURM_PROCID:-0}" = 0 ] || exec "$@"
mkdir -p "$locks"
exec 9>>"$locks/${SLURMD_NODENAME:-$(hostname)}.lock"
flock 9
port=$(python3 -c 'import socket, sys
port = int(sys.argv[1])
while True:
    s = socket.socket()
    try:
        s.bind(("", port))
        break
    except OSError:
        port += 1
    finally:
        s.close()
print(port)' "$from")
"$@" 9>&- &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
hex=$(printf %04X "$port") tries=0
while kill -0 "$child" 2>/dev/null && [ "$tries" -lt 1200 ] && \
    ! grep -q ":$hex 00000000:0000 0A" /proc/net/tcp; do
  sleep 0.1; tries=$((tries + 1))
done
flock -u 9
exec 9>&-
while :; do
  wait "$child"; status=$?
  kill -0 "$child" 2>/dev/null || exit "$status"
done"""


def leader_gate(topo: Topology, run_dir: str) -> list[str]:
    """The words in front of the MPI launcher that start one leader at a time per node;
    none where the engine's launcher takes no port."""
    port_from = engine_for(topo.backend).mpi_leader_port_from
    if port_from is None:
        return []
    return ["sh", "-c", LEADER_GATE, "mpi-leader-gate", f"{run_dir}/locks",
            str(port_from)]


def uses_mpi_launch(topo: Topology, spec: ProcessSpec) -> bool:
    return launches_mpi_ranks(topo) and spec.role is not None


def worker_env(topo: Topology, spec: ProcessSpec) -> dict[str, str]:
    """The worker's own environment (its engine's is in it, as on every target), and the
    site's UCX devices."""
    env = dict(spec.env)
    if devices := (topo.placement.slurm or SlurmPlacement()).ucx_net_devices:
        env["UCX_NET_DEVICES"] = devices
    return env


def worker_launch_argv(topo: Topology, spec: ProcessSpec, *, node: str, run_dir: str,
                       log: str | None) -> list[str]:
    """`srun` for the worker's TP ranks on `node` (a name or a run-time variable), inside the
    container when there is one, then `env`, `trtllm-llmapi-launch` and the worker's argv.
    `log` None: the ranks' output goes to srun's own (the agent's log of the worker)."""
    tp = len(spec.gpus)
    cpus = (topo.placement.slurm or SlurmPlacement()).cpus_per_gpu
    words = ["srun", "--overlap", "--nodes=1", f"--nodelist={node}",
             # One rank per GPU, all on the worker's node (NVIDIA: --ntasks-per-node = GPUs).
             f"--ntasks={tp}", f"--ntasks-per-node={tp}", f"--cpus-per-task={cpus}",
             *MPI_FLAGS, f"--job-name={spec.name}"]
    if log is not None:
        words.append(f"--output={log}")
    if (image := step_image(topo, run_dir)) is not None:
        words += [f"--container-image={image}", *PYXIS_FLAGS,
                  f"--container-mounts={','.join(container_mounts(topo, run_dir))}"]
    argv = list(spec.argv)
    env = [f"{k}={v}" for k, v in sorted(worker_env(topo, spec).items())]
    launcher = engine_for(topo.backend).mpi_launcher
    assert launcher is not None  # only workers that `uses_mpi_launch` come here
    return [*words, "env", *env, *leader_gate(topo, run_dir), launcher, *argv]
