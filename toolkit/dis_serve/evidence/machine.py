"""What the machine a run happened on is: CPU, memory, GPUs and driver, read from the OS,
psutil and `nvidia-smi` (where present). The only part of `evidence` that reads the host."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

_NVIDIA_SMI_TIMEOUT_S = 10.0


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GpuEvidence(_Frozen):
    name: str
    memory_mib: int | None = Field(description="Total memory as nvidia-smi reports it.")
    uuid: str | None = None


class HostEvidence(_Frozen):
    """One machine, as observed when the run began."""

    hostname: str
    os: str = Field(description="Kernel name and release, e.g. Linux 6.1.0.")
    machine: str = Field(description="CPU architecture, e.g. x86_64.")
    cpu_model: str | None = Field(description="/proc/cpuinfo's model name.")
    cpu_logical: int | None = Field(description="Logical CPUs (hardware threads).")
    cpu_physical: int | None = Field(description="Physical cores.")
    memory_gib: float = Field(description="Total memory, GiB.")
    gpus: list[GpuEvidence] = Field(default_factory=list)
    gpu_driver: str | None = Field(default=None, description="NVIDIA driver version.")


def cpu_model(cpuinfo: str) -> str | None:
    """The `model name` of the first CPU in /proc/cpuinfo's text."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("model name", "Model") and value.strip():
            return value.strip()
    return None


def parse_nvidia_smi(csv_text: str) -> tuple[list[GpuEvidence], str | None]:
    """GPUs and driver from `nvidia-smi --query-gpu=name,memory.total,driver_version,uuid
    --format=csv,noheader,nounits`."""
    gpus, driver = [], None
    for line in csv_text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0]:
            continue
        name, memory, driver, uuid = fields
        gpus.append(GpuEvidence(name=name, memory_mib=int(memory) if memory.isdigit() else None,
                                uuid=uuid or None))
    return gpus, driver


def _nvidia_smi() -> str:
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return ""
    try:
        done = subprocess.run(
            [binary, "--query-gpu=name,memory.total,driver_version,uuid",
             "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=_NVIDIA_SMI_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def observe_host() -> HostEvidence:
    import psutil

    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    gpus, driver = parse_nvidia_smi(_nvidia_smi())
    uname = platform.uname()
    return HostEvidence(
        hostname=uname.node, os=f"{uname.system} {uname.release}", machine=uname.machine,
        cpu_model=cpu_model(cpuinfo) or platform.processor() or None,
        cpu_logical=os.cpu_count(), cpu_physical=psutil.cpu_count(logical=False),
        memory_gib=round(psutil.virtual_memory().total / 2**30, 2),
        gpus=gpus, gpu_driver=driver)
