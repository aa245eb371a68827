"""Where the processes run: this machine, listed hosts, or one Slurm job."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import Field, model_validator

from .base import Strict


class PlacementKind(StrEnum):
    LOCAL = "local"
    HOSTS = "hosts"
    SLURM = "slurm"

    @property
    def multi_node(self) -> bool:
        """Processes on several machines: they listen on cluster-facing addresses and find
        etcd and NATS on the head node."""
        return self is not PlacementKind.LOCAL

    @classmethod
    def supervised_here(cls) -> PlacementKind:
        """The placement of a graph whose supervisor runs in this process or beside it on
        this machine (`up` of a local graph; `bench` brings any topology up that way)."""
        return cls.LOCAL

    @property
    def started_by_hand(self) -> bool:
        """dis-serve prepares the run directory and people start a script on each node:
        it cannot start processes on machines it does not schedule."""
        return self is PlacementKind.HOSTS


class KvInterconnect(StrEnum):
    TCP = "tcp"
    RDMA = "rdma"


HOST_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
# An IPv4/IPv6 address or a DNS name: it lands in command lines and comments of scripts.
ADDRESS_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,252}")
# Partition, account and job names go on #SBATCH lines, which the shell does not quote.
SLURM_WORD_RE = re.compile(r"[A-Za-z0-9_.,@+-]{1,128}")
# Slurm's --time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
SLURM_TIME_RE = re.compile(r"\d+|\d+:\d{2}|\d+:\d{2}:\d{2}|\d+-\d+(:\d{2}){0,2}")


class HostNode(Strict):
    """One machine of a `hosts` placement."""

    name: str = Field(description="Node name: its script is node-<name>.sh. Letters, digits, "
                                  "dots, dashes, underscores.")
    address: str = Field(
        min_length=1,
        description="Cluster-facing address (IP or DNS name) this node's processes listen on "
                    "and advertise to the others. Never 0.0.0.0 unless you mean every "
                    "interface.")
    gpus: int | None = Field(
        default=None, ge=0, le=16,
        description="GPUs on this node that dis-serve may use (default: "
                    "hardware.gpus_per_node; 0 for a head node without GPUs).")


class HostsPlacement(Strict):
    """Machines you start by hand (or with your own tooling), one script per node."""

    nodes: list[HostNode] = Field(min_length=1, description="The machines, in node order.")
    head: str | None = Field(
        default=None,
        description="Node that runs etcd, NATS and the frontend (default: the first).")

    @property
    def head_index(self) -> int:
        names = [n.name for n in self.nodes]
        return names.index(self.head) if self.head in names else 0


class SlurmPlacement(Strict):
    """One Slurm job (sbatch) for the whole graph; each process is an srun step on its node."""

    partition: str | None = Field(default=None, description="sbatch --partition.")
    account: str | None = Field(default=None, description="sbatch --account.")
    time_limit: str = Field(
        default="04:00:00", description="sbatch --time (HH:MM:SS, D-HH:MM:SS, minutes...).")
    nodes: int | None = Field(
        default=None, ge=1, le=1024,
        description="Nodes to allocate (default: hardware.nodes; must agree with it).")
    gpus_per_node: int | None = Field(
        default=None, ge=0, le=16,
        description="GPUs to request per node (default: hardware.gpus_per_node for GPU "
                    "backends, 0 for the mocker).")
    container_image: str | None = Field(
        default=None, min_length=1,
        description="Container image for every step (pyxis/enroot: srun --container-image), "
                    "e.g. nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1 or the .sqsh "
                    "`enroot import` made of it. Required for TensorRT-LLM graphs; `none` "
                    "runs every step on the nodes' own software (bare metal).")
    image_cache: str | None = Field(
        default=None, min_length=1,
        description="Directory on storage every node mounts for the .sqsh of a registry "
                    "container_image: the job's first step `enroot import`s it there once "
                    "(under a lock; kept for later jobs) and every step runs the file, as "
                    "srt-slurm's recipes run theirs, instead of each step pulling the image. "
                    "Default: images/ in the run directory.")
    container_mounts: list[str] = Field(
        default_factory=list,
        description="More srun --container-mounts entries (SRC:DST); the run directory and "
                    "model.path are mounted at their own paths already.")
    cpus_per_gpu: int = Field(
        default=8, ge=1, le=256,
        description="CPUs per TensorRT-LLM rank (srun --cpus-per-task; one rank per GPU).")
    ucx_net_devices: str | None = Field(
        default=None, min_length=1,
        description="UCX_NET_DEVICES for the KV transfer (e.g. mlx5_0:1,mlx5_1:1). Default: "
                    "unset, UCX uses every device it finds.")
    interface: str | None = Field(
        default=None,
        description="Network interface whose IPv4 address each node listens on and "
                    "advertises, resolved on the node when the job runs (e.g. ib0). Default: "
                    "the address the node's hostname resolves to.")
    sbatch_extra: list[str] = Field(
        default_factory=list,
        description="Extra #SBATCH lines, without the prefix (e.g. --exclusive, "
                    "--qos=high).")
    job_name: str | None = Field(default=None, description="sbatch --job-name (default: "
                                                           "dis-serve-<name>).")


class Placement(Strict):
    """Where the processes run: this machine (default), listed hosts, or a Slurm job."""

    hosts: HostsPlacement | None = Field(
        default=None, description="Machines you name, one script per node.")
    slurm: SlurmPlacement | None = Field(
        default=None, description="One sbatch job for the whole graph.")
    interconnect: KvInterconnect = Field(
        default=KvInterconnect.TCP,
        description="How KV cache moves between nodes: tcp | rdma (InfiniBand/RoCE, which "
                    "UCX/NIXL use when the nodes have it).")

    @model_validator(mode="after")
    def _one_kind(self) -> Placement:
        if self.hosts is not None and self.slurm is not None:
            raise ValueError("placement has both hosts and slurm; keep one of them")
        return self

    @property
    def head_index(self) -> int:
        """The node that runs etcd, NATS and the frontend."""
        return self.hosts.head_index if self.hosts is not None else 0

    def node_identity(self, index: int) -> tuple[str, str | None]:
        """Node `index`'s name and cluster-facing address: a listed host's own; a Slurm
        node's is resolved on the node when the job runs (None); this machine's loopback."""
        if self.hosts is not None:
            return self.hosts.nodes[index].name, self.hosts.nodes[index].address
        return f"node{index}", None if self.slurm is not None else "127.0.0.1"

    @property
    def kind(self) -> PlacementKind:
        if self.hosts is not None:
            return PlacementKind.HOSTS
        if self.slurm is not None:
            return PlacementKind.SLURM
        return PlacementKind.LOCAL

