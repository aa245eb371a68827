"""`agent`: supervise one node's processes of a multi-node graph (launch/agent.py).

Started by the generated sbatch script (one srun per node) and by each hosts node script;
people run it by hand only to start a node themselves.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import typer

from ..inputs.options import Command

if TYPE_CHECKING:
    from ..change.requests import AutoscalerRequest
    from ..launch.request import AgentRequest, ClearDataRequest, InflictRequest


def agent(request: AgentRequest) -> None:
    """Run and supervise this node's processes until SIGTERM (exit 0) or failure (exit 1)."""
    from ..errors import UserInputError
    from ..launch.agent import run_agent
    from ..render.run_layout import CLUSTER_PLAN_FILE

    run_dir = request.run_dir
    if not (run_dir / CLUSTER_PLAN_FILE).is_file():
        raise UserInputError(f"{run_dir} has no {CLUSTER_PLAN_FILE}", key="RUN_DIR",
                             fix="pass the directory `up` or `render --target hosts` wrote")
    raise typer.Exit(run_agent(run_dir, request.node))


def inflict(request: InflictRequest) -> None:
    """On the node itself (`dis-serve fault` starts it there): apply a fault to the pids its
    agent recorded in state-<node>.json."""
    from ..errors import UserInputError
    from ..launch.agent import NodeRunDir
    from ..launch.faults import apply_fault

    run_dir, node = request.run_dir, request.node
    state = NodeRunDir(run_dir, node).read_state()
    if state is None:
        raise UserInputError(f"{run_dir} has no readable state-{node}.json", key="--node",
                             fix="is this node's agent running?")
    apply_fault(state, request.process, request.action, request.duration)


def clear_data(request: ClearDataRequest) -> None:
    """On a node (the Slurm batch script's exit, `down`): remove the graph's data directories
    on this machine (etcd and NATS members, the balancer) that no live agent owns any more
    (launch/node_data.py)."""
    from pydantic import ValidationError

    from ..errors import UserInputError
    from ..launch.node_data import clear_data as clear
    from ..launch.node_data import data_dir_nodes
    from ..launch.rundir import RunDir

    run = RunDir(request.run_dir)
    try:
        topo = run.read_topology()
    except (OSError, ValidationError) as exc:
        raise UserInputError(f"{run.topology_file} cannot be read ({type(exc).__name__})",
                             key="RUN_DIR", fix="pass the run directory `up` wrote") from None
    for path in clear(topo, os.environ, data_dir_nodes(run)):
        print(f"removed {path} (no agent owned it any more)")


def autoscaler(request: AutoscalerRequest) -> None:
    """Beside Dynamo's planner (`autoscale`; the supervisor starts it): carry out and
    acknowledge each of its decisions (change/autoscaler.py)."""
    from ..change.autoscaler import run_autoscaler
    from ..launch.rundir import RunDir
    from ..placements.registry import handle_for_run

    run = RunDir(request.run_dir)
    run_autoscaler(handle_for_run(run).live(), run.read_topology().namespace)


COMMANDS = (Command(agent, ("dis_serve.launch.request:AgentRequest",)),
            Command(inflict, ("dis_serve.launch.request:InflictRequest",), hidden=True),
            Command(clear_data, ("dis_serve.launch.request:ClearDataRequest",), hidden=True),
            Command(autoscaler, ("dis_serve.change.requests:AutoscalerRequest",),
                    hidden=True))
