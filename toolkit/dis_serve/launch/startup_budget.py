"""How long a worker may take to become ready, from the size of what it loads.

One budget for every target: `dis-serve up` waits this long for the graph, and the Kubernetes
startup probe allows this long before it restarts a worker. Too short a budget kills a worker
that was about to be ready (and a restart starts the whole load again); too long only delays
the report of a worker that will never be ready.

A TRT-LLM worker's cold start is, roughly:
- reading its checkpoint from the model cache: the whole checkpoint at `CACHE_READ_GBPS`, a
  rate a shared ReadWriteMany volume still sustains per pod when every worker of a 48-GPU
  graph reads at once (local NVMe is ten times faster; the budget is for the slow case);
- `ENGINE_INIT_S` for the rest: Python and CUDA start-up, NCCL between the TP ranks, TRT-LLM's
  autotuner, CUDA-graph capture for every batch size, the KV-cache allocation;
- all of it twice (`SAFETY_FACTOR`), because a budget that is exceeded costs a restart and a
  whole new load.
For Llama-3.1-70B this gives about 32 minutes in FP8 and 44 in BF16: under the Dynamo
operator's own 2-hour default, well over the 15 minutes a first cold start can take.
The mocker loads a tokenizer and starts in about a second; its budget only absorbs a slow CI
machine.
"""

from __future__ import annotations

import math

from ..topology import Topology

CACHE_READ_GBPS = 0.2
ENGINE_INIT_S = 600.0
SAFETY_FACTOR = 2.0
MOCKER_BUDGET_S = 120.0


def worker_startup_budget_s(topo: Topology) -> float:
    """Seconds from a worker's start until it must answer /health, rounded up to 10 s
    (the probe period)."""
    if not topo.backend.needs_gpu:
        return MOCKER_BUDGET_S
    load = topo.checkpoint_gb / CACHE_READ_GBPS + ENGINE_INIT_S
    return float(math.ceil(load * SAFETY_FACTOR / 10) * 10)


def readiness_timeout_s(topo: Topology, requested: float | None = None) -> float:
    """How long `up` (local, detached or Slurm) waits for the graph to be ready: what the
    caller asked for, else (None or 0) the workers' startup budget."""
    return requested or worker_startup_budget_s(topo)
