"""A real single-node Slurm cluster on this machine, for tests and benchmarks.

Debian's slurm-wlm and munge (the project's install step adds them when it runs as root), a
generated slurm.conf with its own ports, state and spool directories under a temporary
directory, and the three daemons: munged with its own key and socket, slurmctld, slurmd.
`stop()` cancels every job and stops the daemons by the pids they wrote.

    with SlurmCluster.start(tmp_dir) as cluster:
        subprocess.run(["sbatch", ...], env=cluster.env)
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo", "scontrol")
# Its own ports, away from the ones a system Slurm (6817/6818) and the tests' graphs use.
SLURMCTLD_PORT = 18870
SLURMD_PORT = 18871


def unavailable_reason() -> str | None:
    """Why a Slurm cluster cannot be started here, or None when it can."""
    if os.geteuid() != 0:
        return "starting slurmd/slurmctld needs root (CI runs as root)"
    missing = [name for name in (*DAEMONS, *CLIENTS) if shutil.which(name) is None
               and not Path("/usr/sbin", name).is_file()]
    if missing:
        return (f"{', '.join(missing)} not installed (make install adds slurm-wlm and munge "
                "when run as root)")
    return None


def _binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def _conf(root: Path, host: str) -> str:
    cpus = os.cpu_count() or 1
    memory_mb = int(psutil.virtual_memory().total / 2**20 * 0.8)
    return "\n".join([
        "ClusterName=disserve-test",
        f"SlurmctldHost={host}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.socket",
        # Every daemon (slurmctld too) and srun bind the address the host name resolves to,
        # not every interface.
        "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny",
        # linuxproc and task/none need no cgroups, so this runs inside a container.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "KillWait=5",
        f"SlurmctldPort={SLURMCTLD_PORT}",
        f"SlurmdPort={SLURMD_PORT}",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd.log",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=FORCE",
        "",
    ])


@dataclass
class SlurmCluster:
    root: Path
    host: str

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, dis-serve) needs to reach this cluster."""
        return os.environ | {"SLURM_CONF": str(self.conf)}

    @classmethod
    def start(cls, root: Path, timeout_s: float = 30.0) -> SlurmCluster:
        host = socket.gethostname().split(".")[0]
        cluster = cls(root=root, host=host)
        for sub in ("munge", "state", "spool", "log"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "munge").chmod(0o700)
        key = root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        cluster.conf.write_text(_conf(root, host))
        try:
            cluster._run(_binary("munged"), "--force", f"--key-file={key}",
                         f"--socket={root}/munge/munge.socket",
                         f"--pid-file={root}/munge/munged.pid",
                         f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/seed")
            cluster._run(_binary("slurmctld"), "-f", str(cluster.conf))
            cluster._run(_binary("slurmd"), "-f", str(cluster.conf))
            cluster._wait_idle(timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _run(self, *argv: str) -> None:
        # Each daemon forks into the background and writes its pid file.
        subprocess.run(argv, env=self.env, check=True, capture_output=True, timeout=30)

    def _wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, text=True,
                                 capture_output=True, check=False).stdout
            if out.strip() == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"Slurm node not idle after {timeout_s:g} s; see {self.root}/log")

    def pids(self) -> dict[str, int]:
        found = {}
        for name, path in (("munged", self.root / "munge" / "munged.pid"),
                           ("slurmctld", self.root / "slurmctld.pid"),
                           ("slurmd", self.root / "slurmd.pid")):
            with contextlib.suppress(OSError, ValueError):
                found[name] = int(path.read_text().split()[0])
        return found

    def jobs(self) -> list[str]:
        out = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, text=True,
                             capture_output=True, check=False).stdout
        return out.split()

    def stop(self, timeout_s: float = 20.0) -> None:
        """Cancel every job, then stop slurmd, slurmctld and munged by their pids."""
        if self.conf.exists() and "slurmctld" in self.pids():
            subprocess.run(["scancel", "--full", "--user", "root"], env=self.env,
                           capture_output=True, check=False, timeout=30)
            deadline = time.monotonic() + timeout_s
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        for name in ("slurmd", "slurmctld", "munged"):
            pid = self.pids().get(name)
            if pid is not None:
                _stop_pid(pid, timeout_s)

    def __enter__(self) -> SlurmCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _stop_pid(pid: int, timeout_s: float) -> None:
    try:
        proc = psutil.Process(pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout_s)
    except psutil.TimeoutExpired:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    except psutil.NoSuchProcess:
        pass
