"""`up` with placement slurm: prepare the run directory and submit the graph as one job.

Slurm owns the processes; dis-serve owns the run directory. `submit` writes what `render`
writes there (the batch script, cluster plan, topology, engine configs, CA, model card),
calls `sbatch` and writes the run record with the job id. Everything after that goes
through the run directory (the job writes `addresses`, `endpoint` and `logs/` there) and
through squeue and scancel.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ...errors import PreflightError, RunError
from ...launch.graph import local_model_dir
from ...launch.preflight import find_binaries
from ...launch.rundir import RunDir
from ...render.cluster_plan import ClusterPlan
from ...render.launch_plan import RenderContext
from ...render.run_layout import STARTED_FILE
from ...topology import PlacementKind, Topology
from ..cluster.handle import cluster_record
from ..cluster.rendering import RunContext, write_inputs
from ..shared_files import write_files
from .queue import SlurmJob, job_of, job_state, read_job, slurm_command
from .sbatch import JOB_LOG, SCRIPT_FILE, slurm_run_files


def job_started_at(run: RunDir) -> float | None:
    """Unix time the job's batch script started (None before it has)."""
    try:
        return float((run.path / STARTED_FILE).read_text())
    except (OSError, ValueError):
        return None


def _prepare(topo: Topology, run: RunDir) -> ClusterPlan:
    """The run directory as `render` writes it (the same files, by the same function), with
    the run directory's path and this machine's virtual environment in them: the agents,
    etcd, NATS and the frontend run on the nodes from it (on shared storage, like the run
    directory); TensorRT-LLM workers in their container."""
    # What the last job left (its agents' views and plans: the stop order reads them).
    run.clear_earlier_run()
    run.prepare()
    binaries = find_binaries(topo)
    ctx = RunContext(run_dir=str(run.path), python=sys.executable, etcd_bin=binaries.etcd,
                     nats_bin=binaries.nats, model_path=local_model_dir(topo))
    made = slurm_run_files(topo, ctx)
    write_files(made.files, run.path)
    write_inputs(topo, made.plan, run.path)
    # New workers of a change render like these (placements/slurm/handle.py).
    run.write_context(RenderContext(run_dir=run.path, python=ctx.python, etcd_bin=ctx.etcd_bin,
                                    nats_bin=ctx.nats_bin, model_path=ctx.model_path))
    return made.plan


def submit(topo: Topology, run_root: Path | None = None) -> SlurmJob:
    """Prepare the run directory and submit the graph's sbatch job."""
    if topo.placement.kind is not PlacementKind.SLURM:
        raise PreflightError(f"{topo.name}: placement is {topo.placement.kind.value}, not slurm")
    run = RunDir.for_graph(topo.name, run_root.resolve() if run_root else None)
    earlier = read_job(run)
    if earlier is not None and job_state(earlier.job_id).active:
        raise PreflightError(
            f"graph {topo.name!r} is already running as Slurm job {earlier.job_id}; stop it "
            f"with `dis-serve down {topo.name}` or give this graph another name")
    plan = _prepare(topo, run)
    out = slurm_command("sbatch", "--parsable", f"--output={run.logs / JOB_LOG}",
                        f"--chdir={run.path}", str(run.path / SCRIPT_FILE))
    if out.returncode != 0:
        raise RunError(f"sbatch refused the job: {out.stderr.strip() or out.stdout.strip()}")
    record = cluster_record(topo, plan, PlacementKind.SLURM, str(run.path),
                            job_id=out.stdout.strip().split(";")[0], started_at=time.time())
    run.write_record(record)
    job = job_of(record)
    assert job is not None
    return job
