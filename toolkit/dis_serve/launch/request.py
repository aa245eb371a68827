"""What `up`, `prepare`, `status`, `logs`, `down` and a node's own commands (`agent`,
`inflict`, `clear-data`) are asked for: each field a flag of its command (inputs/options),
its description the flag's help."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from ..inputs.options import CliFlag
from ..inputs.request_model import RequestModel
from .faults import FaultAction

GRAPH_NAME_HELP = "Graph name (default: the only running graph)."
RUN_DIR_HELP = "The graph's run directory."


class UpRequest(RequestModel):
    """A graph to start, and how long to wait for it."""

    file: Annotated[Path | None, CliFlag(argument=True)] = Field(
        default=None, description="Topology YAML (default: the built-in demo graph).")
    detach: Annotated[bool, CliFlag(short="-d", negatable=False)] = Field(
        default=False, description="Return once ready; the graph keeps running in the "
                                   "background until `dis-serve down`.")
    timeout: float | None = Field(
        default=None, ge=1, description="Seconds to wait for the graph to be ready (default: "
                                        "the workers' startup budget for this backend and "
                                        "model size).")
    keep_runs: int = Field(default=3, ge=0,
                           description="Earlier runs whose logs and last state are kept in "
                                       "the run directory's previous/ (0: none).")
    prometheus: Annotated[bool, CliFlag(negatable=False)] = Field(
        default=False, description="Also start Prometheus (Debian's prometheus) scraping "
                                   "every process; stopped with the graph.")
    prometheus_port: int = Field(default=9090, ge=1, le=65535,
                                 description="Port of that Prometheus.")


class PrepareRequest(RequestModel):
    """A graph whose nodes someone else starts."""

    file: Annotated[Path, CliFlag(argument=True)] = Field(
        description="Topology YAML with placement hosts.")


class StatusRequest(RequestModel):
    """Which graph to show, and how."""

    name: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description=GRAPH_NAME_HELP)
    as_json: Annotated[bool, CliFlag("--json", negatable=False)] = Field(
        default=False, description="Print the observation as JSON (phase, problems, every "
                                   "process with its node) instead of tables.")


class LogsRequest(RequestModel):
    """Whose logs, how many lines, and whether to keep following them."""

    process: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description="Process name (etcd, nats, frontend, prefill-0...; "
                                  "default: all).")
    follow: Annotated[bool, CliFlag(short="-f", negatable=False)] = Field(
        default=False, description="Keep printing new lines.")
    name: str | None = Field(default=None, description=GRAPH_NAME_HELP)
    lines: Annotated[int, CliFlag(short="-n")] = Field(default=40, ge=0,
                                                       description="Lines to show first.")


class DownRequest(RequestModel):
    """Which graph to stop, or all of them."""

    name: Annotated[str | None, CliFlag(argument=True)] = Field(
        default=None, description=GRAPH_NAME_HELP)
    all_graphs: Annotated[bool, CliFlag("--all", negatable=False)] = Field(
        default=False, description="Stop every running graph.")


class AgentRequest(RequestModel):
    """One node of a multi-node graph, run here."""

    run_dir: Annotated[Path, CliFlag(argument=True)] = Field(
        description="The graph's run directory (as `up` or `render --target hosts` wrote "
                    "it).")
    node: str = Field(description="This node's name in the graph.")


class InflictRequest(RequestModel):
    """A fault on this node's processes, as `dis-serve fault` orders it."""

    run_dir: Annotated[Path, CliFlag(argument=True)] = Field(description=RUN_DIR_HELP)
    node: str = Field(description="This node's name in the graph.")
    action: FaultAction = Field(description="What to do to them.")
    process: str | None = Field(
        default=None, description="One process (default: the node's every process and its "
                                  "agent).")
    duration: float | None = Field(default=None, ge=0.1, le=600,
                                   description="pause only: seconds it stays stopped.")


class ClearDataRequest(RequestModel):
    """The head node's etcd and NATS data to remove."""

    run_dir: Annotated[Path, CliFlag(argument=True)] = Field(description=RUN_DIR_HELP)
