"""The launcher's API: topology in, a running and supervised graph out.

    with start_graph(topo, run_root=tmp) as graph:
        httpx.post(f"{graph.endpoint}/v1/chat/completions", ...)

`start_graph` returns once the graph is ready and stops everything when the block ends.
`prepare_run` is the part `up --detach` runs before handing the graph to a daemon.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..engines import engine_for
from ..errors import RunError
from ..files.atomic_file import write_atomic
from ..render.dynamo_argv import LOOPBACK
from ..render.launch_plan import LaunchPlan, RenderContext, nats_config, render_launch_plan
from ..render.run_layout import CHANGE_FILES, COORDINATION_DATA, NATS_CONFIG
from ..render.tls_planes import generates_nats_token, graph_pki_paths
from ..security.pki_files import TLS_DIR
from ..topology import PlacementKind, Topology
from ..topology.security import TlsMode
from .disk_space import check_disk, needed_bytes
from .events import SupervisorEvent
from .model_card import write_model_card
from .node_configs import write_local_balancer
from .node_data import DataDirClaim, claim_data_dir, local_graph_dir
from .orphans import Leftover, claim
from .plan_watch import PlanWatch
from .port_claims import claim_ports
from .preflight import (
    check_backend,
    check_memory,
    check_placement,
    check_ports,
    exposure_warnings,
    find_binaries,
)
from .run_lock import RunLock
from .run_record import RunRecord, build_record
from .rundir import DEFAULT_KEEP_RUNS, RunDir
from .secrets import GraphSecrets, graph_secrets, nats_token
from .startup_budget import readiness_timeout_s
from .status import GraphStatus
from .supervisor import Supervisor


@dataclass(frozen=True)
class PreparedRun:
    run_dir: RunDir
    plan: LaunchPlan
    cleaned: list[Leftover] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # Kept in memory only (launch/secrets.py): never written with the plan.
    secrets: GraphSecrets = field(default_factory=GraphSecrets, repr=False)
    # Held until everything this run started has stopped (run_lock.py).
    lock: RunLock | None = None
    record: RunRecord | None = None
    # The balancer's own directory (node_data.local_graph_dir), held and removed like the lock.
    balancer_claim: DataDirClaim | None = None

    def release(self) -> None:
        """Give up the balancer's directory (removed) and the lock: nothing this run started
        runs any more, or nothing was started."""
        if self.balancer_claim is not None:
            self.balancer_claim.release()
        if self.lock is not None:
            self.lock.release()


def prepare_run(topo: Topology, run_root: Path | None = None, *,
                keep_runs: int = DEFAULT_KEEP_RUNS) -> PreparedRun:
    """Everything before the first process starts: lock the graph's name, claim the run
    directory (stopping what a dead supervisor left) and the ports, preflight, render, keep
    the last `keep_runs` runs' logs, write the model card and engine configs. The caller
    owns the returned lock and balancer directory (released here if anything fails)."""
    run_dir = RunDir.for_graph(topo.name, run_root.resolve() if run_root else None)
    check_placement(topo)
    nats_token(topo.coordination.nats.auth)  # a missing token stops us before anything else
    lock = RunLock.acquire(run_dir)
    # What is taken on the way (the lock, the balancer's directory) is given back, the last
    # first, if anything fails before the run is handed over.
    with contextlib.ExitStack() as undo:
        undo.callback(lock.release)
        prepared = _prepare_locked(topo, run_dir, lock, keep_runs, undo)
        undo.pop_all()
        return prepared


def _prepare_locked(topo: Topology, run_dir: RunDir, lock: RunLock, keep_runs: int,
                    undo: contextlib.ExitStack) -> PreparedRun:
    cleaned = claim(run_dir)
    check_backend(topo)
    binaries = find_binaries(topo)
    # Outside the run directory, whose deletion the graph survives (node_data.py).
    balancer_dir = local_graph_dir(topo, os.environ) if topo.frontend.balancer else None
    context = RenderContext(
        run_dir=run_dir.path.resolve(), python=sys.executable, etcd_bin=binaries.etcd,
        haproxy_bin=binaries.haproxy, balancer_dir=balancer_dir,
        nats_bin=binaries.nats, model_path=local_model_dir(topo))
    plan = render_launch_plan(topo, context)
    check_memory(plan, topo)
    claim_ports(plan, lock)
    check_ports(plan, topo)
    if topo.coordination.uses_external_planes:
        from ..coordination.shared_planes import check_shared

        check_shared(topo)
    balancer_claim = None
    if balancer_dir is not None:
        balancer_claim = claim_data_dir(balancer_dir, topo.name)
        undo.callback(balancer_claim.release)
    # An old etcd keeps the old workers' registrations (until their leases expire), which
    # the new frontend would route to. (Within one run they are kept: a restarted etcd or
    # NATS finds its data again.)
    run_dir.remove(COORDINATION_DATA + CHANGE_FILES)
    # After the last run's etcd and NATS data made their room.
    check_disk(topo.name, needed_bytes(plan, topo, Path(plan.run_dir)),
               fix="set DIS_SERVE_HOME to a directory on a larger disk")
    run_dir.archive_previous(keep_runs)
    run_dir.prepare()
    write_worker_inputs(topo, run_dir.path.resolve(), plan.model_path if plan.needs_model_card
                        else None)
    write_coordination_inputs(topo, run_dir)
    if balancer_dir is not None:
        write_local_balancer(topo, plan, run_dir.path.resolve(), balancer_dir)
    run_dir.write_launch_inputs(topo, plan, context)
    # Also replaces the record of an earlier run of this name elsewhere (a Slurm job's).
    record = build_record(topo, placement=PlacementKind.supervised_here(),
                          run_dir=str(run_dir.path.resolve()), frontend=plan.endpoint,
                          frontend_tls=plan.endpoint_tls,
                          processes=[p.name for p in plan.processes],
                          balancer_dir=None if balancer_dir is None else str(balancer_dir))
    run_dir.write_record(record)
    return PreparedRun(run_dir=run_dir, plan=plan, cleaned=cleaned,
                       warnings=exposure_warnings(topo),
                       secrets=graph_secrets(topo, run_dir.path.resolve()),
                       lock=lock, record=record, balancer_claim=balancer_claim)


def write_coordination_inputs(topo: Topology, run_dir: RunDir) -> None:
    """What the planes read from the run directory: a new CA and certificates for this run
    (`security.tls: auto`, with a NATS token where the topology names none; the server
    certificate also names an HTTPS frontend's host), and the embedded NATS server's config
    (TLS, token: the token itself stays in its environment)."""
    path = run_dir.path.resolve()
    if topo.security.tls.mode is TlsMode.AUTO:
        from ..security.certs import issue_graph_pki, write_pki
        from ..security.host_names import frontend_names

        # An HTTPS frontend is called by the names clients reach it at.
        names = frontend_names(topo.frontend.local_host) if topo.frontend_https else []
        write_pki(issue_graph_pki(topo.name, [LOOPBACK, *names],
                                  validity_days=topo.security.tls.validity_days),
                  path / TLS_DIR)
    if generates_nats_token(topo):
        from ..security.certs import write_nats_token

        write_nats_token(path / TLS_DIR)
    config = nats_config(topo, graph_pki_paths(topo.security, path))
    if config is not None:
        write_atomic(path / NATS_CONFIG, config, 0o600)


def write_worker_inputs(topo: Topology, run_dir: Path, model_card: str | None) -> None:
    """What workers read from the run directory: the tokenizer-only model card (at
    `model_card`, when the plan needs one) and the engine configs."""
    if model_card is not None:
        write_model_card(Path(model_card), topo.model.resolved_architecture(),
                         name=topo.model.id)
    if engine_for(topo.backend).uses_engine_config:
        # Owned by the renderer (render/engine_config.py): one YAML per pool role at the paths
        # the plan's --extra-engine-args name.
        from ..render.engine_config import write_engine_configs

        write_engine_configs(topo, run_dir)


def local_model_dir(topo: Topology) -> str | None:
    """A mocker model id that names a local directory is used as is (the user's own card or
    a downloaded model); any other id gets a generated tokenizer-only card."""
    if not engine_for(topo.backend).needs_model_card:
        return None
    path = Path(topo.model.id).expanduser()
    return str(path.resolve()) if (path / "config.json").is_file() else None


class RunningGraph:
    """A graph supervised by a thread of this process. Use as a context manager."""

    def __init__(self, prepared: PreparedRun, supervisor: Supervisor,
                 thread: threading.Thread) -> None:
        self.prepared = prepared
        self.supervisor = supervisor
        self._thread = thread

    @property
    def plan(self) -> LaunchPlan:
        return self.prepared.plan

    @property
    def endpoint(self) -> str:
        return self.plan.endpoint

    @property
    def model_name(self) -> str:
        return self.plan.model_name

    @property
    def run_dir(self) -> Path:
        return self.prepared.run_dir.path

    def status(self) -> GraphStatus:
        return self.supervisor.snapshot

    def wait_ready(self, timeout: float | None = None) -> None:
        """Block until ready; raise RunError (after everything stopped) if the graph failed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while not self.supervisor.ready.wait(0.1):
                if self.supervisor.finished.is_set():
                    raise RunError(self.supervisor.error or "the graph stopped before it was "
                                                            "ready")
                if deadline is not None and time.monotonic() >= deadline:
                    raise RunError(f"{self.plan.name}: not ready in time")
        except BaseException:
            self.stop()
            raise

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the graph has stopped (by `stop` or by failing); True if it has."""
        return self.supervisor.finished.wait(timeout)

    @property
    def error(self) -> str | None:
        return self.supervisor.error

    def stop(self) -> None:
        self.supervisor.request_stop()
        self.supervisor.finished.wait()
        self._thread.join()
        self.prepared.release()
        atexit.unregister(self.stop)

    def __enter__(self) -> RunningGraph:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch_graph(topo: Topology, *, run_root: Path | None = None,
                 ready_timeout_s: float | None = None,
                 on_event: Callable[[SupervisorEvent], None] | None = None,
                 keep_runs: int = DEFAULT_KEEP_RUNS) -> RunningGraph:
    """Prepare and start the graph; return at once (see `RunningGraph.wait_ready`). The
    readiness budget defaults to the workers' startup budget for the backend and model."""
    ready_timeout_s = readiness_timeout_s(topo, ready_timeout_s)
    prepared = prepare_run(topo, run_root, keep_runs=keep_runs)
    run_dir = prepared.run_dir
    supervisor = Supervisor(prepared.plan, run_dir, ready_timeout_s=ready_timeout_s,
                            on_event=on_event, secrets=prepared.secrets,
                            plan_source=PlanWatch(run_dir.plan_file, run_dir.read_plan))
    # A daemon thread: if the caller forgets to stop, interpreter exit still runs `stop`
    # (atexit), and if the process is killed the kernel kills the children (pdeathsig).
    thread = threading.Thread(target=supervisor.run, name=f"dis-serve-{topo.name}",
                              daemon=True)
    graph = RunningGraph(prepared, supervisor, thread)
    atexit.register(graph.stop)
    thread.start()
    return graph


def start_graph(topo: Topology, *, run_root: Path | None = None,
                ready_timeout_s: float | None = None,
                on_event: Callable[[SupervisorEvent], None] | None = None) -> RunningGraph:
    """Start the graph and return once it is ready (RunError, everything stopped, if not)."""
    graph = launch_graph(topo, run_root=run_root, ready_timeout_s=ready_timeout_s,
                         on_event=on_event)
    graph.wait_ready()
    return graph
