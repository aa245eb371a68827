"""A graph's run directory: where `status`, `logs` and `down` find a graph from another shell.

Under `$DIS_SERVE_HOME` (default `./.dis-serve`), `runs/<name>/` is graph <name>'s run
directory; render/run_layout.py names every file in it. `state.json` is rewritten atomically
on every change; each log is rotated by size (<process>.log.1 is the newest old part).

Private by default: directories 0700, files 0600 (logs hold prompts, state holds pids).
Trusted only when ours: the run root and every directory under it must be owned by this user
and writable by no one else, and no link in it is followed (private_path.py says why).
"""

from __future__ import annotations

import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from ..errors import RunError, UserInputError, no_space
from ..files.atomic_file import overwrite_in_place, write_atomic
from ..files.private_path import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    check_trusted,
    copy_private,
    ensure_private_dir,
    open_private,
    read_own_text,
)
from ..render.launch_plan import LaunchPlan, RenderContext
from ..render.run_layout import (
    ADDRESSES_FILE,
    CLUSTER_PLAN_FILE,
    CONTEXT_FILE,
    EARLIER_RUN_GLOBS,
    LEGACY_SLURM_JOB_FILE,
    LOGS_DIR,
    PLAN_FILE,
    PREVIOUS_DIR,
    RECORD_FILE,
    STATE_FILE,
    SUPERVISOR_LOG,
    TOPOLOGY_FILE,
)
from ..topology import Topology, is_valid_name
from .ansi import strip_ansi
from .run_record import RunRecord
from .status import GraphStatus

if TYPE_CHECKING:
    from ..render.cluster_plan import ClusterPlan

HOME_ENV = "DIS_SERVE_HOME"
# Logs grow about 6 KB per request at Dynamo's default level: rotate by size, keep a few.
LOG_MAX_BYTES = 32 * 1024 * 1024
LOG_BACKUPS = 3
DEFAULT_KEEP_RUNS = 3


def default_root() -> Path:
    """The directory that holds `runs/`: `$DIS_SERVE_HOME`, else `.dis-serve` in the cwd;
    UserInputError when it is there but not ours (owner, mode or a link)."""
    env = os.environ.get(HOME_ENV)
    root = Path(env).expanduser().resolve() if env else Path.cwd() / ".dis-serve"
    check_trusted(root, "run root")
    return root


def _trusted_runs(root: Path | None) -> Path:
    """`runs/` under the run root, both checked to be ours."""
    if root is None:
        root = default_root()
    else:
        check_trusted(root, "run root")
    runs = root / "runs"
    check_trusted(runs, "run root")
    return runs


class UnreadableState(RunError):
    """A state file that is there but cannot be read (truncated, overwritten, not a graph's
    status): reported as such, never taken for a graph with no state."""

    def __init__(self, path: Path, why: str) -> None:
        self.path = path
        super().__init__(f"{path} cannot be read ({why}); the graph's processes may still "
                         f"run: `dis-serve down {path.parent.name}` finds them through the "
                         "graph's lock and stops them")


class RunDir:
    """Paths and files of one graph's run directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def for_graph(cls, name: str, root: Path | None = None) -> RunDir:
        """The run directory of graph `name`; UserInputError for a name that is not a graph
        name (`..`, slashes, a newline) or a directory that leads out of the run root."""
        runs = _trusted_runs(root)
        if not is_valid_name(name):
            raise UserInputError(f"{name[:60]!r} is not a graph name", key="name",
                                 fix="graph names are 2-40 lower-case letters, digits or "
                                     "dashes; `dis-serve status` lists the graphs")
        path = runs / name
        check_trusted(path, "run directory")
        return cls(path)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def logs(self) -> Path:
        return self.path / LOGS_DIR

    @property
    def plan_file(self) -> Path:
        return self.path / PLAN_FILE

    @property
    def topology_file(self) -> Path:
        return self.path / TOPOLOGY_FILE

    @property
    def state_file(self) -> Path:
        return self.path / STATE_FILE

    @property
    def supervisor_log(self) -> Path:
        return self.logs / SUPERVISOR_LOG

    def log_file(self, process: str) -> Path:
        return self.logs / f"{process}.log"

    @property
    def record_file(self) -> Path:
        return self.path / RECORD_FILE

    @property
    def cluster_plan_file(self) -> Path:
        return self.path / CLUSTER_PLAN_FILE

    @property
    def slurm_job_file(self) -> Path:
        """Where dis-serve before the run record kept a Slurm graph's job (read for such run
        directories only: placements/legacy.py)."""
        return self.path / LEGACY_SLURM_JOB_FILE

    def exists(self) -> bool:
        return any(path.is_file() for path in (self.record_file, self.state_file,
                                               self.plan_file, self.slurm_job_file,
                                               self.cluster_plan_file))

    def clear_earlier_run(self) -> None:
        """Before a multi-node graph starts here again: remove what its last run left."""
        if self.path.is_dir():
            self.remove(tuple(sorted({p.name for pattern in EARLIER_RUN_GLOBS
                                      for p in self.path.glob(pattern)})))

    def remove(self, names: tuple[str, ...]) -> None:
        """Delete these files or directories of the run directory (what an earlier run of the
        graph left that the next must not be judged by)."""
        for name in names:
            _remove(self.path / name)

    @property
    def previous(self) -> Path:
        return self.path / PREVIOUS_DIR

    def prepare(self) -> None:
        """Make the run root (0700 when new), runs/, this run directory and logs/, or check
        the ones there are ours; the last three are set to 0700."""
        root = self.path.parent.parent
        root.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(root, PRIVATE_DIR)
        except FileExistsError:
            check_trusted(root, "run root")
        for directory, what in ((root / "runs", "run root"), (self.path, "run directory"),
                                (self.logs, "log directory")):
            ensure_private_dir(directory, what)

    def open_log(self, process: str) -> int:
        """A file descriptor appending to the process's log (created private, never through
        a link)."""
        self.prepare()
        return open_private(self.log_file(process), os.O_WRONLY | os.O_CREAT | os.O_APPEND)

    def rotate_logs(self, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> list[str]:
        """Copy each log past `max_bytes` to `.1` (older parts shift up, the oldest goes) and
        empty it in place: its process keeps its descriptor and, appending, writes on at the
        start. The names of the logs rotated."""
        rotated = []
        for log in sorted(self.logs.glob("*.log")):
            try:
                st = log.lstat()
                if not stat.S_ISREG(st.st_mode) or st.st_size <= max_bytes:
                    continue  # a link is never followed, not even to measure it
                for index in range(backups - 1, 0, -1):
                    older = log.with_name(f"{log.name}.{index}")
                    if older.exists() or older.is_symlink():
                        older.replace(log.with_name(f"{log.name}.{index + 1}"))
                copy_private(log, log.with_name(f"{log.name}.1"))
                os.truncate(log, 0)
                rotated.append(log.stem)
            except OSError:
                continue  # gone meanwhile, or the directory was removed: try next time
        return rotated

    def archive_previous(self, keep_runs: int = DEFAULT_KEEP_RUNS) -> Path | None:
        """Move the last run's logs and state under previous/<time>/ and keep only the
        newest `keep_runs` of those (0: keep none). Where they went, if anywhere."""
        moved = None
        # A link at previous/ is refused, not followed: moving logs into it would hand them
        # to whoever made it.
        check_trusted(self.previous, "run directory")
        if keep_runs > 0 and (self.logs.is_dir() or self.state_file.is_file()):
            stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self._last_started()))
            ensure_private_dir(self.previous, "run directory")
            moved = self.previous / stamp
            suffix = 1
            while moved.exists() or moved.is_symlink():
                suffix += 1
                moved = self.previous / f"{stamp}-{suffix}"
            os.mkdir(moved, PRIVATE_DIR)
            for item in (self.logs, self.state_file):
                if item.exists() or item.is_symlink():
                    item.replace(moved / item.name)  # a rename moves a link, never its target
        for item in (self.logs, self.state_file):
            _remove(item)
        if self.previous.is_dir():
            runs = sorted(p for p in self.previous.iterdir() if p.is_dir() and not p.is_symlink())
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
    @property
    def context_file(self) -> Path:
        """What the plan was rendered with besides the topology (interpreter, binaries,
        model directory), so a change of the running graph renders its new workers alike."""
        return self.path / CONTEXT_FILE

    def write_launch_inputs(self, topo: Topology, plan: LaunchPlan,
                            context: RenderContext | None = None) -> None:
        self.prepare()
        write_atomic(self.topology_file, topo.model_dump_json(indent=2), PRIVATE_FILE)
        write_atomic(self.plan_file, plan.model_dump_json(indent=2), PRIVATE_FILE)
        if context is not None:
            self.write_context(context)

    def write_context(self, context: RenderContext) -> None:
        write_atomic(self.context_file, context.model_dump_json(indent=2), PRIVATE_FILE)

    def write_topology(self, topo: Topology) -> None:
        """The topology the graph now runs (a change of the running graph, once done)."""
        write_atomic(self.topology_file, topo.model_dump_json(indent=2), PRIVATE_FILE)

    def write_plan(self, plan: LaunchPlan) -> None:
        write_atomic(self.plan_file, plan.model_dump_json(indent=2), PRIVATE_FILE)

    def read_context(self) -> RenderContext:
        return RenderContext.model_validate_json(read_own_text(self.context_file))

    def write_record(self, record: RunRecord) -> None:
        """The run record (launch/run_record.py), written by the handle that starts the run."""
        write_atomic(self.record_file, record.model_dump_json(indent=2), PRIVATE_FILE)

    def read_record(self) -> RunRecord | None:
        """The run record, or None where there is none (a run directory of an earlier
        dis-serve, or a local `up` still preparing) or it is unreadable."""
        try:
            return RunRecord.model_validate_json(read_own_text(self.record_file))
        except (OSError, ValueError, ValidationError):
            return None

    def read_topology(self) -> Topology:
        """The topology the graph was started from (the doctor's expectations, `down`'s
        shared etcd/NATS)."""
        return Topology.model_validate_json(read_own_text(self.topology_file))

    def read_plan(self) -> LaunchPlan:
        return LaunchPlan.model_validate_json(read_own_text(self.plan_file))

    def read_cluster_plan(self) -> ClusterPlan:
        """A multi-node graph's plan, what every node's agent supervises its share of."""
        # The multi-node renderers are imported where a multi-node run is read: a local `up`
        # (whose bring-up waits for every import) never needs them.
        from ..render.cluster_plan import ClusterPlan

        return ClusterPlan.model_validate_json(self.cluster_plan_file.read_text())

    def read_addresses(self) -> dict[str, str]:
        """The node names and addresses a Slurm job found (NAME=value lines); {} before the
        batch script has written them."""
        try:
            lines = (self.path / ADDRESSES_FILE).read_text().splitlines()
        except OSError:
            return {}
        return dict(line.split("=", 1) for line in lines if "=" in line)

    def plan_rendered_from(self, topo: Topology) -> LaunchPlan | None:
        """The plan `up` rendered from exactly this topology, or None (no run here, or a run
        of another topology under the same name)."""
        try:
            if read_own_text(self.topology_file) != topo.model_dump_json(indent=2):
                return None
            return self.read_plan()
        except (OSError, ValueError, ValidationError):
            return None

    def write_state(self, status: GraphStatus) -> None:
        """Atomically; on a full disk, the last record is overwritten in its own blocks (a
        stopped graph must not stay recorded as ready for want of room for a copy)."""
        try:
            write_atomic(self.state_file, status.model_dump_json(indent=2), PRIVATE_FILE)
        except OSError as exc:
            if not no_space(exc) or not self.state_file.is_file():
                raise
            overwrite_in_place(self.state_file, status.model_dump_json())

    def read_state(self) -> GraphStatus | None:
        """The last recorded status, or None when there is none (or it is unreadable:
        `load_state` tells the two apart)."""
        try:
            return self.load_state()
        except UnreadableState:
            return None

    def load_state(self) -> GraphStatus | None:
        """The last recorded status; None when none was recorded; UnreadableState when the
        file is there but is no graph status (truncated, random bytes, unreadable)."""
        try:
            text = read_own_text(self.state_file)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UnreadableState(self.state_file, exc.strerror or type(exc).__name__) from None
        except ValueError:  # not UTF-8
            raise UnreadableState(self.state_file, "not text: overwritten?") from None
        try:
            return GraphStatus.model_validate_json(text)
        except ValidationError as exc:
            what = "empty" if not text.strip() else (
                "not JSON: truncated or overwritten?" if exc.errors()[0]["type"] == "json_invalid"
                else "JSON, but not a graph's status")
            raise UnreadableState(self.state_file, what) from None

    def tail(self, process: str, lines: int = 20) -> list[str]:
        """The last `lines` lines of a process's log, without terminal colour codes."""
        path = self.log_file(process)
        try:
            with os.fdopen(open_private(path, os.O_RDONLY), "rb") as f:
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
                    with os.fdopen(open_private(path, os.O_RDONLY), "rb") as f:
                        f.seek(offsets[proc])
                        chunk = f.read().decode("utf-8", "replace")
                        offsets[proc] = f.tell()
                except OSError:
                    continue
                *complete, partial[proc] = (partial[proc] + chunk).split("\n")
                for line in complete:
                    yield proc, strip_ansi(line)
            time.sleep(poll_s)


def _remove(path: Path) -> None:
    """Delete a file, a link (not what it leads to) or a directory tree."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.is_symlink() or path.exists():
        path.unlink()


def list_runs(root: Path | None = None) -> list[RunDir]:
    runs = _trusted_runs(root)
    if not runs.is_dir():
        return []
    return sorted((RunDir(p) for p in runs.iterdir()
                   if p.is_dir() and not p.is_symlink() and is_valid_name(p.name)),
                  key=lambda r: r.name)
