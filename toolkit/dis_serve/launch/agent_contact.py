"""How a node's agent and the client reach each other through the run directory (shared
storage at Slurm sites; the one copied to every node and back for hosts), with no port of
its own:

    heartbeat-<node>.json   rewritten by the agent every HEARTBEAT_S (pid, create time, host):
                            the client calls a node whose heartbeat is older than
                            HEARTBEAT_STALE_S hung or gone (a SIGSTOP, a dead agent, a
                            partitioned or powered-off node), which a state file written
                            only on change cannot say
    stop-request            written by `dis-serve down` of a hosts graph and by the Slurm
                            batch script's trap (scancel, time limit): every agent started
                            before it stops its node in `ProcessKind` order
    fault-<node>-<id>.json  a fault `dis-serve fault` asks of a hosts node (chaos); the agent
                            hands it to `dis-serve inflict` on its node (faults.py)

Clocks: ages are the client's clock against the file's modification time, so nodes and the
client must keep time together (NTP; munge, which Slurm needs, requires it already).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..files.atomic_file import write_atomic
from ..render.run_layout import FAULT_PREFIX, STOP_REQUEST_FILE, heartbeat_file_name
from .process import create_time, same_process

HEARTBEAT_S = 1.0
HEARTBEAT_STALE_S = 6.0


def heartbeat_file(run_dir: Path, node: str) -> Path:
    return run_dir / heartbeat_file_name(node)


@dataclass(frozen=True)
class Heartbeat:
    """A node agent's last heartbeat, as the client reads it."""

    age_s: float
    pid: int
    create_time: float | None
    host: str

    @property
    def agent_dead_here(self) -> bool:
        """The agent ran on this very machine and its pid is no longer it (killed): known
        at once, without waiting for the heartbeat to go stale."""
        return self.host == socket.gethostname() and not same_process(self.pid,
                                                                       self.create_time)

    @property
    def stale(self) -> bool:
        return self.age_s > HEARTBEAT_STALE_S or self.agent_dead_here


def read_heartbeat(run_dir: Path, node: str, now: float | None = None) -> Heartbeat | None:
    path = heartbeat_file(run_dir, node)
    try:
        age = (time.time() if now is None else now) - path.stat().st_mtime
        data = json.loads(path.read_text())
        return Heartbeat(age_s=max(0.0, age), pid=int(data["pid"]),
                         create_time=data.get("create_time"), host=str(data["host"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def request_stop(run_dir: Path) -> None:
    write_atomic(run_dir / STOP_REQUEST_FILE, f"{time.time()}\n", 0o600)


def _stop_requested_since(run_dir: Path, started_at: float) -> bool:
    try:
        return (run_dir / STOP_REQUEST_FILE).stat().st_mtime >= started_at
    except OSError:
        return False


def request_fault(run_dir: Path, node: str, argv: list[str]) -> Path:
    """Ask the agent of `node` to run `dis-serve inflict ARGV...` there."""
    path = run_dir / f"{FAULT_PREFIX}{node}-{time.time_ns()}.json"
    write_atomic(path, json.dumps({"argv": argv}), 0o600)
    return path


def _start_requested_faults(run_dir: Path, node: str) -> None:
    """Each request is taken (deleted) before its command starts, so it runs once."""
    for path in sorted(run_dir.glob(f"{FAULT_PREFIX}{node}-*.json")):
        try:
            argv = [str(word) for word in json.loads(path.read_text())["argv"]]
            path.unlink()
        except (OSError, ValueError, KeyError, TypeError):
            continue
        # Its own session: a fault that pauses this agent must not pause itself.
        subprocess.Popen([sys.executable, "-m", "dis_serve", "inflict", str(run_dir),
                          "--node", node, *argv], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)


def keep_in_touch(run_dir: Path, node: str, on_stop_request: Callable[[], None]
                  ) -> threading.Event:
    """In the agent: the first heartbeat now, then a thread that beats, honours a stop
    request newer than this agent, and starts requested faults. Set the returned event to
    end it (it is a daemon thread, so the agent's exit ends it too)."""
    done = threading.Event()
    started_at = time.time()
    beat = json.dumps({"pid": os.getpid(), "create_time": create_time(os.getpid()),
                       "host": socket.gethostname()})
    path = heartbeat_file(run_dir, node)
    write_atomic(path, beat, 0o600)

    def loop() -> None:
        stopping = False
        while not done.wait(HEARTBEAT_S):
            try:
                write_atomic(path, beat, 0o600)
                if not stopping and _stop_requested_since(run_dir, started_at):
                    stopping = True
                    on_stop_request()
                _start_requested_faults(run_dir, node)
            except OSError:
                continue  # shared storage hiccup: the next beat tries again

    threading.Thread(target=loop, name=f"contact-{node}", daemon=True).start()
    return done
