"""Stand-in for `python3 -m dynamo.trtllm` in the MPI rank test (tests/integration/
test_mpi_ranks.py): each rank joins the MPI world the srun step made and writes what it sees
to $RANK_PROBE_DIR/<step>-<rank>.json. Run by Debian's python3 with python3-mpi4py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from mpi4py import MPI

KEPT = ("SLURM_", "OMPI_", "PMIX_", "TRTLLM_", "UCX_", "NCCL_", "CUDA_")


def main() -> None:
    world = MPI.COMM_WORLD
    record = {
        "world_size": world.Get_size(),
        "rank": world.Get_rank(),
        "node": os.environ.get("SLURMD_NODENAME"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "cpu_affinity": sorted(os.sched_getaffinity(0)),
        "argv": sys.argv[1:],
        "env": {k: v for k, v in os.environ.items() if k.startswith(KEPT)},
    }
    world.Barrier()  # every rank really is in one world
    step = f"{os.environ['SLURM_JOB_ID']}.{os.environ['SLURM_STEP_ID']}"
    out = Path(os.environ["RANK_PROBE_DIR"]) / f"{step}-{record['rank']}.json"
    out.write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
