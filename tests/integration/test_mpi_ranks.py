"""TensorRT-LLM workers launched exactly as their node's agent launches them (the Slurm plan's
worker line, placements/slurm/mpi_launch.py), on the
multi-node test bed (three Slurm nodes in network namespaces, real slurmd, `srun --mpi=pmix`).

Only two things stand in: the worker's final Python module (the word after `-m`, swapped by
this test) is tests/mpi_probe/mpi_rank_probe.py, which records what each
rank sees; and `trtllm-llmapi-launch`, which TRT-LLM ships and which cannot be installed here, is
a script that runs the command in every rank (the real one runs it in rank 0 and makes ranks
1..TP-1 TRT-LLM's MPI workers). Each worker must be one MPI world of TP ranks, all on its node,
with the GPU ids of the plan, a Slurm task count TRT-LLM reads as its world size (a 1 there is
what makes it spawn ranks of its own), ranks not pinned to one CPU, and NVIDIA's environment.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from dis_serve.engines.trtllm import WORKER_ENV as NVIDIA_WORKER_ENV
from dis_serve.placements.slurm.sbatch import node_address_var, render_slurm_plan
from dis_serve.render.shell_words import word
from dis_serve.topology import Topology

pytestmark = pytest.mark.integration
PROBE_DIR = REPO / "tests" / "mpi_probe"
SYSTEM_PYTHON = "/usr/bin/python3"
LAUNCH_STAND_IN = """#!/bin/sh
# Test stand-in for TRT-LLM's trtllm-llmapi-launch: every rank runs the command.
exec "$@"
"""


def _require_mpi() -> None:
    probe = subprocess.run([SYSTEM_PYTHON, "-c", "import mpi4py"], capture_output=True,
                           check=False)
    if probe.returncode != 0 or shutil.which("ompi_info") is None:
        pytest.skip("Open MPI and python3-mpi4py are not installed (make install does it)")


def _topology() -> Topology:
    """A TensorRT-LLM graph of three nodes of two GPUs: a TP2 prefill worker and two TP2
    decode workers, one worker per node; bare metal (the test bed has no pyxis)."""
    return Topology.model_validate({
        "name": "mpi-ranks",
        "model": {"id": "meta-llama/Llama-3.1-8B-Instruct", "max_input_tokens": 1024,
                  "max_output_tokens": 128},
        "hardware": {"gpu": "h100-sxm", "gpus_per_node": 2, "nodes": 3},
        "backend": "trtllm", "mode": "disagg",
        "pools": {"prefill": {"workers": 1, "tensor_parallel": 2},
                  "decode": {"workers": 2, "tensor_parallel": 2}},
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


def test_each_worker_is_one_mpi_world_of_tp_ranks_on_its_node(netns_cluster, tmp_path):
    _require_mpi()
    topo = _topology()
    run, out, bin_dir = tmp_path / "run", tmp_path / "ranks", tmp_path / "bin"
    for directory in (run / "logs", out, bin_dir):
        directory.mkdir(parents=True)
    launcher = bin_dir / "trtllm-llmapi-launch"
    launcher.write_text(LAUNCH_STAND_IN)
    launcher.chmod(0o755)
    script, workers = _job_script(topo, run, bin_dir, out)
    (tmp_path / "job.sh").write_text(script)
    job = subprocess.run(["sbatch", "--wait", "--nodes=3", "--ntasks-per-node=2",
                          "--exclusive", "--mem=0", f"--output={tmp_path}/job.log",
                          str(tmp_path / "job.sh")],
                         env=netns_cluster.env, capture_output=True, text=True, timeout=180,
                         check=False)
    logs = "\n".join(p.read_text() for p in [tmp_path / "job.log", *(run / "logs").iterdir()]
                     if p.exists())
    assert job.returncode == 0, job.stdout + job.stderr + logs

    ranks = [json.loads(p.read_text()) for p in out.iterdir()]
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
