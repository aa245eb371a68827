"""`dis-serve fault`: one fault, now, on a running graph: a process (on a named node) or a
whole node. Each placement is reached where its pids live:

- local: signals from here, pids from `state.json`;
- Slurm: `srun --jobid=J --overlap --nodelist=HOST -N1 -n1 python -m dis_serve inflict
  ...`, a step of the graph's own job on that node, which reads the node's state file for
  pids (node_faults.py); Slurm's host name of each node is in the job's `addresses`;
- hosts: a request file in the run directory (agent_contact.py) that the node's agent
  hands to the same `inflict` on its node within a second. A node whose agent is hung
  cannot take one: fault it again after it continues.

A pause returns after the SIGCONT on every placement.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable

from ..errors import RunError, UserInputError
from ..launch.agent_contact import request_fault
from ..launch.cluster_view import is_hosts_run
from ..launch.rundir import RunDir
from ..launch.slurm_jobs import SlurmJob, job_state, read_job
from ..render.cluster_plan import ClusterPlan, NodeProcesses
from ..render.slurm import node_name_var
from .node_faults import apply_fault
from .scenario import FaultAction

REQUEST_TAKEN_S = 10.0


def _node_of(plan: ClusterPlan, node: str | None, process: str | None) -> NodeProcesses:
    names = ", ".join(n.name for n in plan.nodes)
    if node is None:
        for candidate in plan.nodes:
            if any(p.name == process for p in candidate.processes):
                return candidate
        everything = ", ".join(p.name for n in plan.nodes for p in n.processes)
        raise UserInputError(f"no process {process!r} in graph {plan.name}", key="--process",
                             fix=f"use one of {everything}")
    found = next((n for n in plan.nodes if n.name == node), None)
    if found is None:
        raise UserInputError(f"graph {plan.name} has no node {node!r}", key="--node",
                             fix=f"use one of {names}")
    if process is not None and not any(p.name == process for p in found.processes):
        here = ", ".join(p.name for p in found.processes) or "nothing"
        raise UserInputError(f"no process {process!r} on node {node} of {plan.name}",
                             key="--process", fix=f"node {node} runs {here}")
    return found


def node_fault_args(process: str | None, action: FaultAction,
                    duration_s: float | None) -> list[str]:
    return [*(["--process", process] if process else []), "--action", action.value,
            *(["--duration", f"{duration_s:g}"] if duration_s is not None else [])]


def fault_graph(run: RunDir, *, node: str | None, process: str | None, action: FaultAction,
                duration_s: float | None, say: Callable[[str], None] = print) -> str | None:
    """Apply the fault; the node it hit (None on a local graph)."""
    if node is None and process is None:
        raise UserInputError("nothing to fault", key="--process",
                             fix="give --process NAME, --node NODE, or both")
    job = read_job(run)
    if job is None and not is_hosts_run(run):
        if node is not None:
            raise UserInputError(f"graph {run.name} runs on this machine only", key="--node",
                                 fix="drop --node")
        state = run.load_state()
        if state is None:
            raise UserInputError(f"graph {run.name!r} has no recorded state", key="NAME",
                                 fix="start it with `dis-serve up`")
        apply_fault(state, process, action, duration_s, say)
        return None
    # A job that left the queue (or a cluster whose controller is gone, so squeue cannot
    # answer) has no node to run a step on: one line saying so, not srun's errors.
    if job is not None and not job_state(job.job_id).active:
        raise RunError(f"{run.name} is not running: Slurm job {job.job_id} is not in the "
                       "queue (or its cluster's controller does not answer); nothing to fault")
    target = _node_of(run.read_cluster_plan(), node, process)
    args = node_fault_args(process, action, duration_s)
    if job is not None:
        _via_srun(run, job, target, args, (duration_s or 0.0) + 60.0, say)
    else:
        _via_agent(run, target, args, duration_s, say)
    return target.name


def _via_srun(run: RunDir, job: SlurmJob, node: NodeProcesses, args: list[str],
              timeout_s: float, say: Callable[[str], None]) -> None:
    host = run.read_addresses().get(node_name_var(node.index))
    if host is None:
        raise RunError(f"{run.name}: the job has not written its addresses yet (is Slurm job "
                       f"{job.job_id} running?)")
    argv = ["srun", f"--jobid={job.job_id}", "--overlap", f"--nodelist={host}", "-N1", "-n1",
            f"--job-name=fault-{node.name}", sys.executable, "-m", "dis_serve", "inflict",
            str(run.path), "--node", node.name, *args]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    for line in out.stdout.splitlines():
        say(f"[{node.name}] {line}")
    if out.returncode != 0:
        raise RunError(f"{shlex.join(argv[:6])} ... failed ({out.returncode}): "
                       f"{out.stderr.strip()[-400:]}")


def _via_agent(run: RunDir, node: NodeProcesses, args: list[str], duration_s: float | None,
               say: Callable[[str], None]) -> None:
    path = request_fault(run.path, node.name, args)
    deadline = time.monotonic() + REQUEST_TAKEN_S
    while path.exists():
        if time.monotonic() > deadline:
            path.unlink(missing_ok=True)
            raise RunError(f"{run.name}: the agent of node {node.name} did not take the fault "
                           f"request within {REQUEST_TAKEN_S:g} s (hung, or not running?)")
        time.sleep(0.1)
    say(f"[{node.name}] its agent started: inflict {shlex.join(args)}")
    if duration_s:
        time.sleep(duration_s)
