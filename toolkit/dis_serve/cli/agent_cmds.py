"""`agent`: supervise one node's processes of a multi-node graph (launch/agent.py).

Started by the generated sbatch script (one srun per node) and by each hosts node script;
people run it by hand only to start a node themselves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer


def agent(
    run_dir: Annotated[Path, typer.Argument(
        help="The graph's run directory (as `up` or `render --target hosts` wrote it).")],
    node: Annotated[str, typer.Option("--node", help="This node's name in the graph.")],
) -> None:
    """Run and supervise this node's processes until SIGTERM (exit 0) or failure (exit 1)."""
    from ..errors import UserInputError
    from ..launch.agent import run_agent
    from ..render.run_layout import CLUSTER_PLAN_FILE

    if not (run_dir / CLUSTER_PLAN_FILE).is_file():
        raise UserInputError(f"{run_dir} has no {CLUSTER_PLAN_FILE}", key="RUN_DIR",
                             fix="pass the directory `up` or `render --target hosts` wrote")
    raise typer.Exit(run_agent(run_dir, node))


def inflict(
    run_dir: Annotated[Path, typer.Argument(help="The graph's run directory.")],
    node: Annotated[str, typer.Option("--node", help="This node's name in the graph.")],
    action: Annotated[str, typer.Option("--action", help="kill | term | pause.")],
    process: Annotated[str | None, typer.Option(
        "--process", help="One process (default: the node's every process and its "
                          "agent).")] = None,
    duration: Annotated[float | None, typer.Option("--duration", min=0.1, max=600)] = None,
) -> None:
    """On the node itself (`dis-serve fault` starts it there): apply a fault to the pids its
    agent recorded in state-<node>.json."""
    from ..errors import UserInputError
    from ..launch.agent import NodeRunDir
    from ..launch.faults import FaultAction, apply_fault

    state = NodeRunDir(run_dir, node).read_state()
    if state is None:
        raise UserInputError(f"{run_dir} has no readable state-{node}.json", key="--node",
                             fix="is this node's agent running?")
    apply_fault(state, process, FaultAction(action), duration)


def clear_data(
    run_dir: Annotated[Path, typer.Argument(help="The graph's run directory.")],
) -> None:
    """On the head node (the Slurm batch script's exit, `down`): remove the graph's etcd and
    NATS data directory unless a live agent still owns it (launch/node_data.py)."""
    from pydantic import ValidationError

    from ..errors import UserInputError
    from ..launch.node_data import clear_data as clear
    from ..launch.rundir import RunDir

    run = RunDir(run_dir)
    try:
        topo = run.read_topology()
    except (OSError, ValidationError) as exc:
        raise UserInputError(f"{run.topology_file} cannot be read ({type(exc).__name__})",
                             key="RUN_DIR", fix="pass the run directory `up` wrote") from None
    if (path := clear(topo, os.environ)) is not None:
        print(f"removed {path} (no agent owned it any more)")


def autoscaler(
    run_dir: Annotated[Path, typer.Argument(help="The graph's run directory.")],
) -> None:
    """Beside Dynamo's planner (`autoscale`; the supervisor starts it): carry out and
    acknowledge each of its decisions (change/autoscaler.py)."""
    from ..change.autoscaler import run_autoscaler
    from ..launch.rundir import RunDir
    from ..placements.registry import handle_for_run

    run = RunDir(run_dir)
    run_autoscaler(handle_for_run(run).live(), run.read_topology().namespace)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(agent)
    app.command(hidden=True)(autoscaler)
    app.command(hidden=True)(inflict)
    app.command(hidden=True)(clear_data)  # clear-data
