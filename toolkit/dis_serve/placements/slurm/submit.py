"""`up` with placement slurm: prepare the run directory and submit the graph as one job.

Slurm owns the processes; dis-serve owns the run directory. `submit` writes the model card,
engine configs and the sbatch script there, calls `sbatch` and writes the run record with
the job id. Everything after that goes through the run directory (the job
writes `addresses`, `endpoint` and `logs/` there) and through squeue and scancel.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ...errors import PreflightError, RunError
from ...files.atomic_file import write_atomic
from ...launch.cluster_tls import write_cluster_ca
from ...launch.graph import local_model_dir, write_worker_inputs
from ...launch.preflight import find_binaries
from ...launch.rundir import RunDir
from ...render.cluster_plan import ClusterPlan
from ...render.launch_plan import RenderContext
from ...render.run_layout import (
    ADDRESSES_FILE,
    CHANGE_FILES,
    CLUSTER_PLAN_FILE,
    ENDPOINT_FILE,
    STARTED_FILE,
    STOP_REQUEST_FILE,
)
from ...security.pki_files import TLS_DIR
from ...topology import PlacementKind, Topology
from ..cluster.handle import cluster_record
from ..cluster.view import agent_files
from .queue import SlurmJob, job_of, job_state, read_job, slurm_command
from .sbatch import JOB_LOG, render_sbatch_script, render_slurm_plan

SCRIPT_FILE = "job.sbatch"
# Left from an earlier job of the same graph; the new job must not be judged by them.
_EPHEMERAL = ("etcd-data", "nats-data", "logs", ENDPOINT_FILE, ADDRESSES_FILE, STARTED_FILE,
              STOP_REQUEST_FILE, "state.json", TLS_DIR, *CHANGE_FILES)


def job_started_at(run: RunDir) -> float | None:
    """Unix time the job's batch script started (None before it has)."""
    try:
        return float((run.path / STARTED_FILE).read_text())
    except (OSError, ValueError):
        return None


def _prepare(topo: Topology, run: RunDir) -> ClusterPlan:
    # The last job's agents' views and plans: the new job must not be judged by them (and
    # the stop order reads them).
    run.remove(_EPHEMERAL + agent_files(run))
    run.prepare()
    root = str(run.path)
    # The agents, etcd, NATS and the frontend run on the nodes from this virtual environment
    # (on shared storage, like the run directory); TensorRT-LLM workers in their container.
    binaries = find_binaries(topo)
    kwargs: dict[str, str | None] = {"model_path": local_model_dir(topo),
                                     "python": sys.executable, "etcd_bin": binaries.etcd,
                                     "nats_bin": binaries.nats}
    plan = render_slurm_plan(topo, run_dir=root, **kwargs)
    run.write_context(RenderContext(run_dir=run.path, **kwargs))
    write_worker_inputs(topo, run.path, plan.model_path if plan.needs_model_card else None)
    write_cluster_ca(topo, run.path)
    (run.path / SCRIPT_FILE).write_text(render_sbatch_script(topo, run_dir=root, **kwargs))
    write_atomic(run.path / CLUSTER_PLAN_FILE, plan.model_dump_json(indent=2))
    write_atomic(run.topology_file, topo.model_dump_json(indent=2))
    return plan


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
