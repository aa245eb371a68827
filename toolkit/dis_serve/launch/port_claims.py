"""Ports a graph is about to listen on, claimed machine-wide before any process starts.

`check_ports` binds each port to see if it is free; two `up` of different graphs on the
same ports, started at once, both found them free (nothing listened yet), and the loser
learned it only from its etcd and NATS crash-looping. A claim closes that window: one JSON
file per graph under a per-user directory in the system's temporary directory, written
while holding that directory's lock, naming the graph's run lock. A claim counts only while
its graph's run lock is held (run_lock.py), so a graph that died, however it died, claims
nothing and no cleanup is ever needed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path

from ..errors import PreflightError
from ..render.launch_plan import LaunchPlan
from .preflight import port_key
from .run_lock import RunLock, holder_of
from .rundir import PRIVATE_DIR, PRIVATE_FILE


def claims_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"dis-serve-{os.getuid()}" / "ports"


def claim_ports(plan: LaunchPlan, lock: RunLock) -> Path:
    """Record that the graph holding `lock` will listen on the plan's ports; PreflightError
    (one line, as check_ports words it) when a graph that is starting or running claimed
    one of them. Returns the claim file."""
    directory = claims_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR)
    ours = _claim_file(directory, lock.path)
    wanted = {port: (spec, name) for spec in plan.processes
              for name, port in spec.ports.items()}
    with _exclusive(directory / "claims.lock"):
        for other in directory.glob("*.json"):
            if other == ours:
                continue
            claim = _read(other)
            holder = holder_of(Path(claim["lock"])) if claim else None
            if holder is None:
                other.unlink(missing_ok=True)  # its graph is gone
                continue
            assert claim is not None
            for port in sorted(set(claim["ports"]) & set(wanted)):
                spec, name = wanted[port]
                key = port_key(spec, name, plan)
                raise PreflightError(
                    f"port {port} for {spec.name} ({key}) is already in use by graph "
                    f"{claim['graph']!r} (starting or running, pid {holder}); stop it with "
                    f"`dis-serve down {claim['graph']}` or set {key} to a free port")
        fd = os.open(ours, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        with os.fdopen(fd, "w") as out:
            json.dump({"graph": plan.name, "lock": str(lock.path),
                       "ports": sorted(wanted)}, out)
    return ours


def _claim_file(directory: Path, lock: Path) -> Path:
    return directory / f"{hashlib.sha256(str(lock).encode()).hexdigest()[:20]}.json"


def _read(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not {"graph", "lock", "ports"} <= data.keys():
        return None
    return data


@contextlib.contextmanager
def _exclusive(path: Path):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
