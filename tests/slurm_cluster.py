"""A real Slurm cluster on this machine, for tests and benchmarks.

Debian's slurm-wlm and munge (the project's install step adds them when it runs as root), a
generated slurm.conf with its own ports, state and spool directories under a temporary
directory, and the daemons: munged with its own key and socket, slurmctld, and slurmd. This
module has the single-node cluster (one slurmd on loopback) and what it shares with the
multi-node one in `netns_cluster.py` (the config writer, munged, the pid files, stopping):
`stop()` cancels every job and stops the daemons by the pids they wrote.

    with SlurmCluster.start(tmp_dir) as cluster:
        subprocess.run(["sbatch", ...], env=cluster.env)
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "squeue", "scancel", "sinfo", "scontrol")
# A job in one of these states has ended (and its output files are closed).
FINAL_JOB_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
                    "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")
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


def binary(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


def short_hostname() -> str:
    # slurmctld accepts only this machine's own short name as SlurmctldHost.
    return socket.gethostname().split(".")[0]


@dataclass(frozen=True)
class SlurmNode:
    name: str
    address: str


def slurm_conf(root: Path, *, controller_address: str, nodes: Sequence[SlurmNode],
               ctld_port: int, slurmd_port: int, bind_any: bool,
               slurmd_timeout_s: int | None = None) -> str:
    """slurm.conf for slurmctld on this machine at `controller_address` and one slurmd per
    node; every path a slurmd writes carries its node name (%n), so several run side by
    side. `bind_any` False: every daemon (slurmctld too) and srun bind the address the host
    name resolves to, not every interface (enough on loopback; slurmctld then cannot be
    reached at any other address)."""
    cpus = os.cpu_count() or 1
    # Every slurmd sees the whole machine; each may promise all of it (jobs oversubscribe).
    memory_mb = int(psutil.virtual_memory().total / 2**20 * 0.8)
    names = ",".join(node.name for node in nodes)
    return "\n".join([
        "ClusterName=disserve-test",
        f"SlurmctldHost={short_hostname()}({controller_address})",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.socket",
        *([] if bind_any else ["CommunicationParameters=NoCtldInAddrAny,NoInAddrAny"]),
        # linuxproc and task/none need no cgroups, so this runs inside a container.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        "KillWait=5",
        # How long a silent slurmd takes to be marked DOWN (Slurm's default: 300 s).
        *([f"SlurmdTimeout={slurmd_timeout_s}"] if slurmd_timeout_s else []),
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool-%n",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        *(f"NodeName={node.name} NodeAddr={node.address} CPUs={cpus} RealMemory={memory_mb} "
          "State=UNKNOWN" for node in nodes),
        f"PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP "
        "OverSubscribe=FORCE",
        "",
    ])


@dataclass
class SlurmDaemons:
    """munged and slurmctld under `root`, and what a cluster of any size does with them."""

    root: Path
    nodes: tuple[SlurmNode, ...]

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment a client (sbatch, squeue, dis-serve) needs to reach this cluster."""
        return os.environ | {"SLURM_CONF": str(self.conf)}

    def write_config(self, controller_address: str, ctld_port: int, slurmd_port: int,
                     bind_any: bool, slurmd_timeout_s: int | None = None) -> None:
        for sub in ("munge", "state", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        (self.root / "munge").chmod(0o700)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.conf.write_text(slurm_conf(self.root, controller_address=controller_address,
                                        nodes=self.nodes, ctld_port=ctld_port,
                                        slurmd_port=slurmd_port, bind_any=bind_any,
                                        slurmd_timeout_s=slurmd_timeout_s))

    def start_controller(self) -> None:
        root = self.root
        self.run_daemon(binary("munged"), "--force", f"--key-file={root}/munge/munge.key",
                        f"--socket={root}/munge/munge.socket",
                        f"--pid-file={root}/munge/munged.pid",
                        f"--log-file={root}/log/munged.log", f"--seed-file={root}/munge/seed")
        self.run_daemon(binary("slurmctld"), "-f", str(self.conf))

    def reconfigure(self, **settings: int) -> None:
        """slurm.conf settings (`SlurmdTimeout=10`) changed on the running cluster: the file
        rewritten, then `scontrol reconfigure`; each checked with `scontrol show config`."""
        text = self.conf.read_text()
        for key, value in settings.items():
            text = re.sub(rf"^{key}=.*\n", "", text, flags=re.MULTILINE) + f"{key}={value}\n"
        self.conf.write_text(text)
        subprocess.run(["scontrol", "reconfigure"], env=self.env, check=True,
                       capture_output=True, timeout=30)
        config = subprocess.run(["scontrol", "show", "config"], env=self.env, check=True,
                                capture_output=True, text=True, timeout=30).stdout
        for key, value in settings.items():
            found = re.search(rf"^{key}\s*=\s*(\d+)", config, flags=re.MULTILINE)
            if found is None or int(found.group(1)) != value:
                raise RuntimeError(f"slurmctld did not take {key}={value}: "
                                   f"{found.group(0) if found else 'not in its config'}")

    def run_daemon(self, *argv: str) -> None:
        # Each daemon forks into the background and writes its pid file.
        subprocess.run(argv, env=self.env, check=True, capture_output=True, timeout=30)

    def wait_idle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        states: list[str] = []
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], env=self.env, text=True,
                                 capture_output=True, check=False).stdout
            states = out.split()
            if len(states) == len(self.nodes) and set(states) == {"idle"}:
                return
            time.sleep(0.2)
        raise RuntimeError(f"Slurm nodes not idle after {timeout_s:g} s ({states}); see "
                           f"{self.root}/log")

    def pids(self) -> dict[str, int]:
        """Daemon name (slurmd-<node> per node) -> the pid its pid file names."""
        files = {"munged": self.root / "munge" / "munged.pid",
                 "slurmctld": self.root / "slurmctld.pid"}
        files |= {f"slurmd-{n.name}": self.root / f"slurmd-{n.name}.pid" for n in self.nodes}
        found = {}
        for name, path in files.items():
            with contextlib.suppress(OSError, ValueError):
                found[name] = int(path.read_text().split()[0])
        return found

    def live_pids(self) -> list[int]:
        """The daemons' pids that still run (zombies excluded)."""
        return [pid for pid in self.pids().values() if _alive(pid)]

    def jobs(self) -> list[str]:
        out = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, text=True,
                             capture_output=True, check=False).stdout
        return out.split()

    def batch(self, *sbatch_args: str, timeout_s: float) -> tuple[int, str]:
        """`sbatch sbatch_args`, waited for: the job's exit code and its final record
        (`scontrol -o show job`). Polled every 0.2 s, as `sbatch --wait` does not: it checks
        after 2, 4, 6... s, seconds after a short job has ended."""
        submitted = subprocess.run(["sbatch", "--parsable", *sbatch_args], env=self.env,
                                   capture_output=True, text=True, check=True, timeout=30)
        job_id = submitted.stdout.strip().split(";")[0]
        deadline = time.monotonic() + timeout_s
        while True:
            record = subprocess.run(["scontrol", "-o", "show", "job", job_id], env=self.env,
                                    capture_output=True, text=True, check=True).stdout
            fields = dict(w.split("=", 1) for w in record.split() if "=" in w)
            if fields.get("JobState") in FINAL_JOB_STATES:
                return int(fields["ExitCode"].split(":")[0]), record
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still running after {timeout_s:g} s: {record}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Cancel every job, then stop every slurmd, slurmctld and munged by their pids.
        Jobs only while the controller runs: scancel to a dead one retries for 30 s (a
        killed run's pid files outlive its daemons)."""
        controller = self.pids().get("slurmctld")
        if self.conf.exists() and controller is not None and _alive(controller):
            subprocess.run(["scancel", "--full", "--user", "root"], env=self.env,
                           capture_output=True, check=False, timeout=30)
            deadline = time.monotonic() + timeout_s
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        pids = self.pids()
        # Every slurmd at once, then the controller, then munged (the others authenticate
        # through it to the end).
        stop_pids([pid for name, pid in pids.items() if name.startswith("slurmd-")], timeout_s)
        for name in ("slurmctld", "munged"):
            stop_pids([pids[name]] if name in pids else [], timeout_s)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class SlurmCluster(SlurmDaemons):
    """One slurmd for this machine (node name: its short host name) on 127.0.0.1."""

    @property
    def host(self) -> str:
        return self.nodes[0].name

    @classmethod
    def start(cls, root: Path, timeout_s: float = 30.0) -> SlurmCluster:
        cluster = cls(root=root, nodes=(SlurmNode(short_hostname(), "127.0.0.1"),))
        cluster.write_config("127.0.0.1", SLURMCTLD_PORT, SLURMD_PORT, bind_any=False)
        try:
            cluster.start_controller()
            cluster.run_daemon(binary("slurmd"), "-f", str(cluster.conf))
            cluster.wait_idle(timeout_s)
        except BaseException:
            cluster.stop()
            raise
        return cluster


def _alive(pid: int) -> bool:
    try:
        return _running(psutil.Process(pid))
    except psutil.NoSuchProcess:
        return False


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def stop_pids(pids: Sequence[int], timeout_s: float) -> None:
    """SIGTERM every pid at once, wait until each has exited, SIGKILL what still runs after
    `timeout_s`. A zombie has exited: the daemons are orphans, and the init that inherits
    them may reap them seconds later (this machine's does every 2 s)."""
    procs = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc = psutil.Process(pid)
            proc.send_signal(signal.SIGTERM)
            procs.append(proc)
    deadline = time.monotonic() + timeout_s
    while (running := [p for p in procs if _running(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    for proc in running:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
