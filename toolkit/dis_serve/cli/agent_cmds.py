"""`agent`: supervise one node's processes of a multi-node graph (launch/agent.py).

Started by the generated sbatch script (one srun per node) and by each hosts node script;
people run it by hand only to start a node themselves.
"""

from __future__ import annotations

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
    from ..render.cluster_plan import CLUSTER_PLAN_FILE

    if not (run_dir / CLUSTER_PLAN_FILE).is_file():
        raise UserInputError(f"{run_dir} has no {CLUSTER_PLAN_FILE}", key="RUN_DIR",
                             fix="pass the directory `up` or `render --target hosts` wrote")
    raise typer.Exit(run_agent(run_dir, node))


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(agent)
