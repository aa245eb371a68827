"""A graph's run directory: where `status`, `logs` and `down` find a graph from another shell.

Layout under `$DIS_SERVE_HOME` (default `./.dis-serve`):

    runs/<name>/topology.json   the validated topology the graph was started from
    runs/<name>/plan.json       the rendered launch plan
    runs/<name>/state.json      what the supervisor observed last (GraphStatus), rewritten
                                atomically on every change: pids, create times, states
    runs/<name>/logs/<process>.log, logs/supervisor.log
                                each rotated by size: <process>.log.1 is the newest old part
    runs/<name>/previous/<time>/ the logs and last state of earlier runs (`up --keep-runs`)

Private by default: directories 0700, files 0600 (logs hold prompts, state holds pids).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from ..ansi import strip_ansi
from ..atomic_file import write_atomic
from ..errors import UserInputError
from ..render.launch_plan import LaunchPlan
from ..topology import Topology, is_valid_name
from .status import GraphStatus

HOME_ENV = "DIS_SERVE_HOME"
PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# Logs grow about 6 KB per request at Dynamo's default level: rotate by size, keep a few.
LOG_MAX_BYTES = 32 * 1024 * 1024
LOG_BACKUPS = 3
DEFAULT_KEEP_RUNS = 3


def default_root() -> Path:
    """The directory that holds `runs/`: `$DIS_SERVE_HOME`, else `.dis-serve` in the cwd."""
    env = os.environ.get(HOME_ENV)
    return Path(env).expanduser().resolve() if env else Path.cwd() / ".dis-serve"


class RunDir:
    """Paths and files of one graph's run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_graph(cls, name: str, root: Path | None = None) -> RunDir:
        """The run directory of graph `name`; UserInputError for a name that is not a graph
        name (`..`, slashes, a newline) or a directory that leads out of the run root."""
        runs = (root or default_root()) / "runs"
        if not is_valid_name(name):
            raise UserInputError(f"{name[:60]!r} is not a graph name", key="name",
                                 fix="graph names are 2-40 lower-case letters, digits or "
                                     "dashes; `dis-serve status` lists the graphs")
        path = runs / name
        if path.is_symlink() or (path.exists() and path.resolve().parent != runs.resolve()):
            raise UserInputError(f"{path} leads outside {runs}", key="name",
                                 fix="remove that link; run directories are plain directories")
        return cls(path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def plan_file(self) -> Path:
        return self.path / "plan.json"

    @property
    def topology_file(self) -> Path:
        return self.path / "topology.json"

    @property
    def state_file(self) -> Path:
        return self.path / "state.json"

    @property
    def supervisor_log(self) -> Path:
        return self.logs / "supervisor.log"

    def log_file(self, process: str) -> Path:
        return self.logs / f"{process}.log"

    @property
    def slurm_job_file(self) -> Path:
        """A Slurm graph's record (launch/slurm_jobs.py) instead of a supervisor's state."""
        return self.path / "slurm-job.json"

    def exists(self) -> bool:
        return (self.state_file.is_file() or self.plan_file.is_file()
                or self.slurm_job_file.is_file())

    def remove(self, names: tuple[str, ...]) -> None:
        """Delete these files or directories of the run directory (what an earlier run of the
        graph left that the next must not be judged by)."""
        for name in names:
            path = self.path / name
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()

    @property
    def previous(self) -> Path:
        return self.path / "previous"

    def prepare(self) -> None:
        for directory in (self.path, self.logs):
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(PRIVATE_DIR)

    def open_log(self, process: str) -> int:
        """A file descriptor appending to the process's log (created private)."""
        self.prepare()
        return os.open(self.log_file(process), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                       PRIVATE_FILE)

    def rotate_logs(self, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> list[str]:
        """Copy each log past `max_bytes` to `.1` (older parts shift up, the oldest goes) and
        empty it in place: its process keeps its descriptor and, appending, writes on at the
        start. The names of the logs rotated."""
        rotated = []
        for log in sorted(self.logs.glob("*.log")):
            try:
                if log.stat().st_size <= max_bytes:
                    continue
                for index in range(backups - 1, 0, -1):
                    older = log.with_name(f"{log.name}.{index}")
                    if older.exists():
                        older.replace(log.with_name(f"{log.name}.{index + 1}"))
                shutil.copyfile(log, log.with_name(f"{log.name}.1"))
                os.truncate(log, 0)
                rotated.append(log.stem)
            except OSError:
                continue  # gone meanwhile, or the directory was removed: try next time
        return rotated

    def archive_previous(self, keep_runs: int = DEFAULT_KEEP_RUNS) -> Path | None:
        """Move the last run's logs and state under previous/<time>/ and keep only the
        newest `keep_runs` of those (0: keep none). Where they went, if anywhere."""
        moved = None
        if keep_runs > 0 and (self.logs.is_dir() or self.state_file.is_file()):
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self._last_started()))
            moved = self.previous / stamp
            suffix = 1
            while moved.exists():
                suffix += 1
                moved = self.previous / f"{stamp}-{suffix}"
            moved.mkdir(parents=True, mode=PRIVATE_DIR)
            self.previous.chmod(PRIVATE_DIR)
            for item in (self.logs, self.state_file):
                if item.exists():
                    item.replace(moved / item.name)
        for item in (self.logs, self.state_file):
            if item.is_dir():
                shutil.rmtree(item)
            elif item.exists():
                item.unlink()
        if self.previous.is_dir():
            runs = sorted(p for p in self.previous.iterdir() if p.is_dir())
            for old in runs[:max(0, len(runs) - keep_runs)]:
                shutil.rmtree(old, ignore_errors=True)
        return moved

    def _last_started(self) -> float:
        state = self.read_state()
        if state is not None:
            return state.started_at
        try:
            return self.logs.stat().st_mtime
        except OSError:
            return time.time()

    # --- the files ------------------------------------------------------------------------
    def write_launch_inputs(self, topo: Topology, plan: LaunchPlan) -> None:
        self.prepare()
        write_atomic(self.topology_file, topo.model_dump_json(indent=2), PRIVATE_FILE)
        write_atomic(self.plan_file, plan.model_dump_json(indent=2), PRIVATE_FILE)

    def read_topology(self) -> Topology:
        """The topology the graph was started from (the doctor's expectations, `down`'s
        shared etcd/NATS)."""
        return Topology.model_validate_json(self.topology_file.read_text())

    def read_plan(self) -> LaunchPlan:
        return LaunchPlan.model_validate_json(self.plan_file.read_text())

    def plan_rendered_from(self, topo: Topology) -> LaunchPlan | None:
        """The plan `up` rendered from exactly this topology, or None (no run here, or a run
        of another topology under the same name)."""
        try:
            if self.topology_file.read_text() != topo.model_dump_json(indent=2):
                return None
            return self.read_plan()
        except (OSError, ValueError, ValidationError):
            return None

    def write_state(self, status: GraphStatus) -> None:
        write_atomic(self.state_file, status.model_dump_json(indent=2), PRIVATE_FILE)

    def read_state(self) -> GraphStatus | None:
        """The last recorded status, or None when there is none (or it is unreadable)."""
        try:
            return GraphStatus.model_validate_json(self.state_file.read_text())
        except (OSError, ValueError, ValidationError):
            return None

    def tail(self, process: str, lines: int = 20) -> list[str]:
        """The last `lines` lines of a process's log, without terminal colour codes."""
        path = self.log_file(process)
        try:
            with path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 64 * 1024))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return []
        # Dynamo's Rust logger colours its output even when it goes to a file.
        return [strip_ansi(line) for line in text.splitlines()[-lines:]]


    def follow(self, processes: list[str], poll_s: float = 0.2) -> Iterator[tuple[str, str]]:
        """(process, line) for every line appended to these logs after this call; endless."""
        offsets = {p: (self.log_file(p).stat().st_size if self.log_file(p).exists() else 0)
                   for p in processes}
        return self._appended_lines(offsets, poll_s)

    def _appended_lines(self, offsets: dict[str, int],
                        poll_s: float) -> Iterator[tuple[str, str]]:
        partial = dict.fromkeys(offsets, "")
        while True:
            for proc in offsets:
                path = self.log_file(proc)
                try:
                    if path.stat().st_size < offsets[proc]:
                        offsets[proc] = 0  # a new run's file
                    with path.open("rb") as f:
                        f.seek(offsets[proc])
                        chunk = f.read().decode("utf-8", "replace")
                        offsets[proc] = f.tell()
                except OSError:
                    continue
                *complete, partial[proc] = (partial[proc] + chunk).split("\n")
                for line in complete:
                    yield proc, strip_ansi(line)
            time.sleep(poll_s)


def list_runs(root: Path | None = None) -> list[RunDir]:
    runs = (root or default_root()) / "runs"
    if not runs.is_dir():
        return []
    return sorted((RunDir(p) for p in runs.iterdir()
                   if p.is_dir() and not p.is_symlink() and is_valid_name(p.name)),
                  key=lambda r: r.name)
