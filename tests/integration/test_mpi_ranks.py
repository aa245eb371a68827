"""TensorRT-LLM workers launched exactly as their node's agent launches them (the Slurm plan's
worker line, placements/slurm/mpi_launch.py), on the
multi-node test bed (three Slurm nodes in network namespaces, real slurmd, `srun --mpi=pmix`).

Only two things stand in: the worker's final Python module (the word after `-m`, swapped by
this test) is tests/mpi_probe/mpi_rank_probe.py, which records what each
rank sees; and `trtllm-llmapi-launch`, which TRT-LLM ships and which cannot be installed here, is
tests/mpi_probe/launch_stand_in.sh, which runs the command in every rank (the real one runs it
in rank 0 and makes ranks 1..TP-1 TRT-LLM's MPI workers) and races for rank 0's proxy port as
the real one does. Each worker must be one MPI world of TP ranks, all on its node, with the GPU
ids of the plan, a Slurm task count TRT-LLM reads as its world size (a 1 there is what makes it
spawn ranks of its own), ranks not pinned to one CPU, and NVIDIA's environment; two workers on
one node, started at once, must both start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from dis_serve.engines.trtllm import WORKER_ENV as NVIDIA_WORKER_ENV
from dis_serve.placements.slurm.mpi_launch import LEADER_GATE
from dis_serve.placements.slurm.sbatch import node_address_var, render_slurm_plan
from dis_serve.render.shell_words import word
from dis_serve.topology import Topology

pytestmark = pytest.mark.integration
PROBE_DIR = REPO / "tests" / "mpi_probe"
SYSTEM_PYTHON = "/usr/bin/python3"


def _require_mpi() -> None:
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import mpi4py"], capture_output=True,
                           check=False)
    if probe.returncode != 0 or shutil.which("ompi_info") is None:
        pytest.skip("Open MPI and python3-mpi4py are not installed (make install does it)")


def _topology(name: str = "mpi-ranks", *, nodes: int = 3, gpus_per_node: int = 2,
              decode_workers: int = 2) -> Topology:
    """A TensorRT-LLM graph of TP2 workers: by default three nodes of two GPUs, a prefill
    and two decode workers, one worker per node; bare metal (the test bed has no pyxis)."""
    return Topology.model_validate({
        "name": name,
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "max_input_tokens": 1024,
                  "max_output_tokens": 128},
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": gpus_per_node, "nodes": nodes},
        "backend": "trtllm", "mode": "disagg",
        "pools": {"prefill": {"workers": 1, "tensor_parallel": 2},
                  "decode": {"workers": decode_workers, "tensor_parallel": 2}},
        "placement": {"slurm": {"container_image": "none", "cpus_per_gpu": 1}},
    })


def _job_script(topo: Topology, run: Path, bin_dir: Path, out: Path) -> tuple[str, dict]:
    plan = render_slurm_plan(topo, run_dir=str(run))
    workers = {p.name: p for node in plan.nodes for p in node.processes if p.role}
    lines = ["#!/bin/bash", "set -euo pipefail",
             # python3 is Debian's (it has mpi4py); the stand-in launcher comes first.
             f"export PATH={bin_dir}:/usr/bin:/bin PYTHONPATH={PROBE_DIR}",
             f"export RANK_PROBE_DIR={out} RUN_DIR={run} LOGS={run}/logs",
             *(f"export {node_address_var(n.index)}=198.18.0.1{n.index + 1}"
               for n in plan.nodes)]
    lines += [f"export NODE_{n.index}=n{n.index + 1}" for n in plan.nodes]
    for spec in workers.values():
        # The line the worker's agent runs, with only its Python module replaced.
        argv = list(spec.argv)
        argv[argv.index("-m") + 1] = "mpi_rank_probe"
        lines.append(" ".join(word(w) for w in argv) + f" >{run}/logs/{spec.name}.log 2>&1 &")
    lines += ["wait", ""]
    return "\n".join(lines), workers


def _run_job(netns_cluster, topo: Topology, tmp_path: Path) -> tuple[list[dict], dict, str]:
    """The workers' launch lines in one sbatch job on the bed, all started at once: what
    each rank recorded, the workers, and every log."""
    run, out, bin_dir = tmp_path / "run", tmp_path / "ranks", tmp_path / "bin"
    for directory in (run / "logs", out, bin_dir):
        directory.mkdir(parents=True)
    launcher = bin_dir / "trtllm-llmapi-launch"
    shutil.copy(PROBE_DIR / "launch_stand_in.sh", launcher)
    launcher.chmod(0o755)
    script, workers = _job_script(topo, run, bin_dir, out)
    (tmp_path / "job.sh").write_text(script)
    nodes = topo.hardware.nodes
    code, record = netns_cluster.batch(f"--nodes={nodes}", "--ntasks-per-node=2", "--exclusive",
                                       "--mem=0", f"--output={tmp_path}/job.log",
                                       str(tmp_path / "job.sh"), timeout_s=180)
    logs = "\n".join(p.read_text() for p in [tmp_path / "job.log", *(run / "logs").iterdir()]
                     if p.exists())
    assert code == 0, record + logs
    return [json.loads(p.read_text()) for p in out.iterdir()], workers, logs


def test_each_worker_is_one_mpi_world_of_tp_ranks_on_its_node(netns_cluster, tmp_path):
    _require_mpi()
    topo = _topology()
    ranks, workers, logs = _run_job(netns_cluster, topo, tmp_path)
    assert len(ranks) == sum(len(s.gpus) for s in workers.values()), logs
    by_worker: dict[str, list[dict]] = {}
    for rank in ranks:
        by_worker.setdefault(rank["env"]["SLURM_JOB_NAME"], []).append(rank)
    assert sorted(by_worker) == sorted(workers)
    for name, seen in by_worker.items():
        spec = workers[name]
        tp = len(spec.gpus)
        assert sorted(r["rank"] for r in seen) == list(range(tp)), name
        assert {r["world_size"] for r in seen} == {tp}, name
        assert {r["node"] for r in seen} == {f"n{spec.node + 1}"}, name
        assert {r["cuda_visible_devices"] for r in seen} == {",".join(map(str, spec.gpus))}
        # trtllm-llmapi-launch takes SLURM_NTASKS as TRT-LLM's world size.
        assert {r["env"]["SLURM_NTASKS"] for r in seen} == {str(tp)}, name
        assert all(len(r["cpu_affinity"]) > 1 for r in seen), name  # --cpu-bind=none
        for key, value in NVIDIA_WORKER_ENV.items():
            assert all(r["env"][key] == value for r in seen), (name, key)
        own_flags = spec.argv[spec.argv.index("-m") + 2:]
        assert all(r["argv"] == own_flags for r in seen), name


def test_two_tp_rank_groups_on_one_node_both_start(netns_cluster, tmp_path):
    """A TP2 prefill and a TP2 decode worker on one 4-GPU node, their steps started at once:
    their launchers' leaders take the node's proxy ports one at a time (mpi_launch.py's
    LEADER_GATE), so neither loses the port race and both make their MPI worlds."""
    _require_mpi()
    topo = _topology("mpi-ranks-one-node", nodes=1, gpus_per_node=4, decode_workers=1)
    ranks, workers, logs = _run_job(netns_cluster, topo, tmp_path)
    assert {spec.node for spec in workers.values()} == {0}
    assert len(ranks) == 4, logs
    assert sorted(r["env"]["SLURM_JOB_NAME"] for r in ranks) == sorted(
        name for name in workers for _ in range(2))
    ports = sorted(int(line.split()[-1]) for line in logs.splitlines()
                   if line.startswith("leader listens on"))
    assert len(ports) == 2 and ports[0] != ports[1], logs


def test_two_leaders_gated_at_once_on_one_node_listen_on_different_ports(tmp_path):
    """The gate run for real, twice at once as rank 0 of two steps on one node, in front of
    the stand-in launcher that races for its proxy port as TRT-LLM's does
    (tests/mpi_probe/launch_stand_in.sh): without the gate the second one's bind fails."""
    stand_in = PROBE_DIR / "launch_stand_in.sh"
    env = {**os.environ, "SLURM_PROCID": "0", "SLURMD_NODENAME": "n1"}

    def start(gated: bool) -> subprocess.Popen:
        gate = ["sh", "-c", LEADER_GATE, "gate", str(tmp_path / "locks"), "10012"]
        return subprocess.Popen([*(gate if gated else []), "sh", str(stand_in), "sleep", "2"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)

    for gated in (False, True):
        outs = [p.communicate(timeout=60)[0] for p in [start(gated), start(gated)]]
        ports = {line.split()[-1] for out in outs for line in out.splitlines()
                 if line.startswith("leader listens on")}
        # Ungated, they cannot both start (one lost the race); gated, both listen.
        assert len(ports) == 2 if gated else len(ports) <= 1, outs
