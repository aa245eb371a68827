"""TensorRT-LLM workers on Slurm as NVIDIA launches them: one MPI job of TP ranks per worker,
in NVIDIA's container, loading the checkpoint from shared storage. pyxis cannot run here, so
these read the srun lines each node's agent runs (the Slurm plan's worker argv, as a shell
reads it) word by word."""

from __future__ import annotations

import copy
import os
import shlex
import subprocess

from conftest import GRAPHS
from dis_serve.engines.trtllm import WORKER_ENV as NVIDIA_WORKER_ENV
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.placements.slurm.mpi_launch import LEADER_GATE
from dis_serve.placements.slurm.sbatch import render_sbatch_script, render_slurm_plan
from dis_serve.render.launch_plan import ProcessSpec
from dis_serve.render.shell_words import word
from dis_serve.topology import Topology

DISAGG_70B = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
IMAGE = "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1"
SQSH = "${RUN_DIR}/images/nvcr.io+nvidia+ai-dynamo+tensorrtllm-runtime+1.6.1.sqsh"


def _with(topo: Topology, **changes) -> Topology:
    data = copy.deepcopy(topo.model_dump(mode="json", exclude_unset=True)) | changes
    return Topology.model_validate(data)


def _steps(topo: Topology) -> dict[str, list[str]]:
    """Each MPI-launched worker's srun words, by name, as its agent runs them."""
    plan = render_slurm_plan(topo)
    return {p.name: shlex.split(" ".join(word(w) for w in p.argv))
            for node in plan.nodes for p in node.processes if p.argv[0] == "srun"}


def _options(words: list[str]) -> list[str]:
    return words[:words.index("env")]


def _worker(topo: Topology, name: str) -> ProcessSpec:
    plan = render_slurm_plan(topo)
    return next(p for node in plan.nodes for p in node.processes if p.name == name)


def test_every_worker_is_one_mpi_job_of_tp_ranks_on_its_own_node():
    steps = _steps(DISAGG_70B)
    workers = {name: words for name, words in steps.items() if "dynamo.trtllm" in words}
    assert len(workers) == 12
    for name, words in workers.items():
        options = _options(words)
        for flag in ("--mpi=pmix", "--oversubscribe", "--cpu-bind=none", "--nodes=1",
                     "--ntasks=4", "--ntasks-per-node=4", "--cpus-per-task=8"):
            assert flag in options, (name, flag)
        node = _worker(DISAGG_70B, name).node
        assert f"--nodelist=${{NODE_{node}}}" in options


def test_trtllm_llmapi_launch_runs_the_dynamo_worker_in_each_rank():
    words = _steps(DISAGG_70B)["decode-3"]
    launch = words.index("trtllm-llmapi-launch")
    assert words[launch + 1:launch + 4] == ["python3", "-m", "dynamo.trtllm"]
    assert "--tensor-parallel-size" in words[launch:]


def test_workers_run_in_nvidias_container_with_the_checkpoint_mounted_at_its_path():
    path = DISAGG_70B.model.path
    for name, words in _steps(DISAGG_70B).items():
        options = _options(words) if "env" in words else words
        # The .sqsh the job imports from NVIDIA's image (placement.slurm.container_image).
        assert f"--container-image={SQSH}" in options, name
        assert "--no-container-entrypoint" in options and "--no-container-mount-home" in options
        mounts = next(w for w in options if w.startswith("--container-mounts="))
        assert f"{path}:{path}" in mounts.split("=", 1)[1].split(","), name
    decode = _steps(DISAGG_70B)["decode-0"]
    assert decode[decode.index("--model") + 1] == path


def test_workers_get_the_environment_every_nvidia_h100_recipe_sets():
    words = _steps(DISAGG_70B)["prefill-1"]
    env = words[words.index("env") + 1:words.index("trtllm-llmapi-launch")]
    for key, value in NVIDIA_WORKER_ENV.items():
        assert f"{key}={value}" in env
    assert "CUDA_VISIBLE_DEVICES=4,5,6,7" in env
    assert not any(e.startswith("UCX_NET_DEVICES=") for e in env)
    topo = _with(DISAGG_70B, placement={"slurm": {"container_image": IMAGE,
                                                  "ucx_net_devices": "mlx5_0:1,mlx5_1:1"}})
    words = _steps(topo)["prefill-1"]
    assert "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1" in words


def test_the_job_takes_whole_nodes_all_their_memory_and_a_task_slot_per_gpu():
    lines = render_sbatch_script(DISAGG_70B).splitlines()
    for option in ("--exclusive", "--mem=0", "--ntasks-per-node=8", "--gpus-per-node=8"):
        assert f"#SBATCH {option}" in lines


def test_each_worker_node_checks_the_checkpoint_before_anything_starts():
    script = render_sbatch_script(DISAGG_70B)
    checks = [line for line in script.splitlines() if "config.json" in line]
    assert len(checks) == 6  # every node of the 70B graph runs workers
    assert all("*.safetensors" in c and DISAGG_70B.model.path in c and "exit 1" in c
               for c in checks)
    first_step = script.index("--job-name=agent-")
    assert all(script.index(c) < first_step for c in checks)


def test_container_image_none_runs_bare_metal():
    topo = _with(DISAGG_70B, placement={"slurm": {"container_image": "none"}})
    for words in _steps(topo).values():
        assert not any(w.startswith("--container") for w in words)


def test_the_mocker_keeps_one_task_per_worker():
    demo = load_model_file(Topology, GRAPHS / "demo-slurm.yaml")
    script = render_sbatch_script(demo)
    assert "trtllm-llmapi-launch" not in script and "--mpi=pmix" not in script
    assert "#SBATCH --ntasks-per-node=1" in script.splitlines()


def test_hosts_workers_stay_one_process_each_for_trtllms_own_spawn():
    for text in render_hosts_files(DISAGG_70B).values():
        assert "trtllm-llmapi-launch" not in text


def test_the_launch_line_wraps_the_workers_own_argv_unchanged():
    plan = render_slurm_plan(DISAGG_70B)
    launched = next(p for node in plan.nodes for p in node.processes if p.name == "decode-0")
    words = launched.argv
    assert words[words.index("trtllm-llmapi-launch") + 1:][:3] == ["python3", "-m",
                                                                   "dynamo.trtllm"]
    assert "--output=" not in " ".join(words)  # its agent keeps the worker's log


def test_each_hosts_worker_node_checks_the_checkpoint_and_locked_memory_before_its_agent():
    for name, text in render_hosts_files(DISAGG_70B).items():
        if not name.endswith(".sh"):
            continue
        lines = text.splitlines()
        check = next(i for i, line in enumerate(lines) if "config.json" in line)
        memlock = next(i for i, line in enumerate(lines) if "ulimit -l" in line)
        agent = next(i for i, line in enumerate(lines) if " -m dis_serve agent " in line)
        assert check < agent and memlock < agent
        assert f"node {name.removeprefix('node-').removesuffix('.sh')}:" in lines[check]


def test_locked_memory_is_a_hard_stop_only_when_the_kv_cache_moves_over_rdma():
    tcp = render_hosts_files(DISAGG_70B)["node-node1.sh"]
    rdma = render_hosts_files(_with(DISAGG_70B, placement={"interconnect": "rdma"}))[
        "node-node1.sh"]
    memlock = next(line for line in tcp.splitlines() if "ulimit -l" in line)
    assert "exit 1" not in memlock
    assert "exit 1" in next(line for line in rdma.splitlines() if "ulimit -l" in line)


def test_validate_warns_when_a_multi_node_trtllm_graph_has_no_checkpoint_path(run_cli, tmp_path):
    text = (GRAPHS / "llama70b-h100-disagg.yaml").read_text()
    path = tmp_path / "t.yaml"
    path.write_text("\n".join(line for line in text.splitlines()
                              if not line.startswith("  path: ")) + "\n")
    assert "warning: model.path is not set" in run_cli("validate", path).stdout
    assert "model.path is not set" not in run_cli(
        "validate", GRAPHS / "llama70b-h100-disagg.yaml").stdout


def test_the_launcher_starts_behind_the_nodes_leader_gate():
    words = _worker(DISAGG_70B, "decode-3").argv
    gate = words.index("mpi-leader-gate")
    assert words[gate - 3:gate] == ["sh", "-c", LEADER_GATE]
    # The lock directory on the run directory every step mounts; TRT-LLM's port search start.
    assert words[gate + 2:gate + 4] == ["10012", "trtllm-llmapi-launch"]
    assert word(words[gate + 1]) == '"${RUN_DIR}"/locks'



def test_every_step_runs_the_sqsh_the_job_imports_once_before_any_step():
    text = render_sbatch_script(DISAGG_70B)
    lines = text.splitlines()
    [imports] = [i for i, line in enumerate(lines) if "import-image" in line]
    words = shlex.split(lines[imports])
    at = words.index("import-image")
    assert words[at + 1:at + 4] == [SQSH, IMAGE, "||"]
    assert imports < min(i for i, line in enumerate(lines) if "dis_serve agent" in line)
    for name, step in _steps(DISAGG_70B).items():
        assert f"--container-image={SQSH}" in _options(step), name


def test_a_sqsh_of_the_users_own_or_bare_metal_needs_no_import():
    for image in ("/lustre/images/trtllm.sqsh", "none"):
        topo = _with(DISAGG_70B, placement={"slurm": {"container_image": image}})
        assert "import-image" not in render_sbatch_script(topo)
    cached = _with(DISAGG_70B, placement={"slurm": {"container_image": IMAGE,
                                                     "image_cache": "/lustre/images"}})
    assert all(f"--container-image=/lustre/images/{IMAGE.replace('/', '+').replace('#', '+')}"
               .replace(":", "+") + ".sqsh" in _options(step)
               for step in _steps(cached).values())


def test_the_import_runs_once_however_many_jobs_ask_at_once(tmp_path):
    """The job's import step run for real, three times at once, with a stand-in `enroot`
    that takes a second and counts its imports: one import, one complete file."""
    from dis_serve.placements.slurm.sbatch import IMPORT_IMAGE

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "enroot").write_text(
        '#!/bin/sh\n[ "$1 $2" = "import -o" ] || exit 2\necho "$4" >> "$COUNT"\nsleep 1\n'
        'echo squashfs > "$3"\n')
    (bin_dir / "enroot").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
           "COUNT": str(tmp_path / "count")}
    sqsh = tmp_path / "images" / "image.sqsh"
    sqsh.parent.mkdir()
    jobs = [subprocess.Popen(["bash", "-c", IMPORT_IMAGE, "import-image", str(sqsh), IMAGE],
                             env=env) for _ in range(3)]
    assert [job.wait(timeout=30) for job in jobs] == [0, 0, 0]
    assert (tmp_path / "count").read_text().splitlines() == [f"docker://{IMAGE}"]
    assert sqsh.read_text() == "squashfs\n" and not sqsh.with_suffix(".sqsh.part").exists()


def test_each_slurm_worker_node_checks_locked_memory_as_its_steps_get_it():
    from dis_serve.render.shell_words import memlock_check

    rdma = _with(DISAGG_70B, placement={**DISAGG_70B.placement.model_dump(
        mode="json", exclude_unset=True), "interconnect": "rdma"})
    lines = render_sbatch_script(rdma).splitlines()
    checks = [shlex.split(line) for line in lines if "ulimit -l" in line]
    plan = render_slurm_plan(rdma)
    worker_nodes = {n.name for n in plan.nodes if any(p.role for p in n.processes)}
    assert len(checks) == len(worker_nodes)
    for words in checks:
        assert words[:2] == ["srun", "--overlap"] and words[-3:-1] == ["sh", "-c"]
        node = words[-1].split("node ", 1)[1].split(":", 1)[0]
        assert node in worker_nodes
        # The shared check, fatal with RDMA.
        assert words[-1].startswith(memlock_check("x", "y", fatal=True).split("then")[0])
        assert words[-1].endswith("exit 1; fi")
    agents = min(i for i, line in enumerate(lines) if "dis_serve agent" in line)
    assert all(i < agents for i, line in enumerate(lines) if "ulimit -l" in line)
