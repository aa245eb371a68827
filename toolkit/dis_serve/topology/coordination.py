"""etcd, NATS and Dynamo's request and event planes."""

from __future__ import annotations

import re

from pydantic import Field, model_validator

from .base import Port, Strict
from .enums import EtcdMode, EventPlane, NatsMode, ProcessKind, RequestPlane

ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DATA_DIR_RE = re.compile(r"/[A-Za-z0-9._/+-]*")


class Etcd(Strict):
    mode: EtcdMode = Field(default=EtcdMode.EMBEDDED, description="embedded | external.")
    url: str | None = Field(default=None, description="Client URL when external.")
    client_port: Port = Field(default=2379, description="Client port when embedded.")
    peer_port: Port = Field(default=2380, description="Peer port when embedded.")
    members: int | None = Field(
        default=None, ge=1, le=5,
        description="Embedded etcd members, each on its own node (1, 3 or 5: a cluster keeps "
                    "serving while a majority lives). Default: 3 on hosts and Slurm graphs "
                    "of three or more nodes, else 1.")

    @model_validator(mode="after")
    def _url_matches_mode(self) -> Etcd:
        if self.mode is EtcdMode.EXTERNAL and not self.url:
            raise ValueError("etcd.mode is external but etcd.url is missing; set "
                             "url: http://HOST:2379 or use mode: embedded")
        return self

    @model_validator(mode="after")
    def _members_are_odd(self) -> Etcd:
        if self.members is not None and self.members % 2 == 0:
            raise ValueError(f"coordination.etcd.members {self.members} is even: etcd keeps "
                             f"serving while a majority of members lives, and {self.members} "
                             f"members survive no more losses than {self.members - 1}; use "
                             f"{self.members - 1} or {self.members + 1}")
        return self

    @property
    def client_url(self) -> str:
        return self.url if self.url else f"http://127.0.0.1:{self.client_port}"


class NatsAuth(Strict):
    """NATS token authentication for the multi-node targets (hosts, Slurm), where NATS listens
    on the head's cluster address; a local graph keeps NATS on loopback without it. The token
    is read where the processes start (from the file or the environment variable) and never
    written into rendered files or logs."""

    token_file: str | None = Field(
        default=None, description="File that holds the token (on every node).")
    token_env: str | None = Field(
        default=None, description="Environment variable that holds the token where the "
                                  "scripts run (for Slurm: where sbatch is called).")

    @model_validator(mode="after")
    def _one_source(self) -> NatsAuth:
        if (self.token_file is None) == (self.token_env is None):
            raise ValueError("coordination.nats.auth needs exactly one of token_file or "
                             "token_env")
        if self.token_env is not None and not ENV_NAME_RE.fullmatch(self.token_env):
            raise ValueError(f"coordination.nats.auth.token_env {self.token_env!r} is not an "
                             "environment variable name; use letters, digits and _")
        return self


class Nats(Strict):
    mode: NatsMode = Field(default=NatsMode.EMBEDDED, description="embedded | external | off.")
    url: str | None = Field(default=None, description="Server URL when external.")
    port: Port = Field(default=4222, description="Client port when embedded.")
    members: int | None = Field(
        default=None, ge=1, le=64,
        description="Embedded NATS members, on the first nodes from the head on, routing to "
                    "each other (a cluster): each node's processes connect to their own "
                    "node's member, else the head's. Default: one on every node of a hosts "
                    "or Slurm graph (a process restarted while its member is down cannot "
                    "connect: Dynamo 1.6.1 takes one NATS URL), 1 on one machine.")
    cluster_port: Port = Field(
        default=6222,
        description="The port NATS members route to each other on (mutual TLS).")
    auth: NatsAuth | None = Field(
        default=None, description="Token authentication (clients and the embedded server).")

    @model_validator(mode="after")
    def _url_matches_mode(self) -> Nats:
        if self.mode is NatsMode.EXTERNAL and not self.url:
            raise ValueError("nats.mode is external but nats.url is missing; set "
                             "url: nats://HOST:4222 or use mode: embedded")
        return self

    @property
    def client_url(self) -> str | None:
        if self.mode is NatsMode.OFF:
            return None
        return self.url if self.url else f"nats://127.0.0.1:{self.port}"


class Coordination(Strict):
    """Discovery (etcd), messaging (NATS) and Dynamo's request and event planes."""

    etcd: Etcd = Field(default_factory=Etcd, description="Service discovery store.")
    nats: Nats = Field(default_factory=Nats, description="Message bus (JetStream).")
    request_plane: RequestPlane = Field(
        default=RequestPlane.TCP, description="How requests reach workers: tcp | nats.")
    # NATS by default: Dynamo 1.6.1's ZMQ event publishers bind 0.0.0.0 whatever
    # DYN_EVENT_PLANE_HOST says, and a local graph must stay on loopback.
    event_plane: EventPlane = Field(
        default=EventPlane.NATS,
        description="How KV events reach the router: nats | zmq (zmq listens on all "
                    "interfaces in Dynamo 1.6.1).")

    data_dir: str | None = Field(
        default=None,
        description="Hosts and Slurm: node-local directory on the head node under which etcd "
                    "and NATS keep their data, in a private subdirectory "
                    "dis-serve-<user>/<graph>[-<Slurm job id>] (made 0700, owned by the head "
                    "node's agent through a lock, removed when it stops, else by `down`, the "
                    "Slurm job's end or the graph's next start there). Default: $TMPDIR, "
                    "else /tmp; never the shared run directory. A local graph keeps its data "
                    "in its run directory, and its balancer's sockets and configuration in "
                    "dis-serve-<user>/<graph>@machine under this directory (owned and removed "
                    "alike).")

    @property
    def embedded(self) -> tuple[ProcessKind, ...]:
        """The coordination processes the graph runs itself, in start order: etcd unless it
        is external, NATS unless it is external or off."""
        return ((ProcessKind.ETCD,) if self.etcd.mode is EtcdMode.EMBEDDED else ()) + (
            (ProcessKind.NATS,) if self.nats.mode is NatsMode.EMBEDDED else ())

    @property
    def uses_external_planes(self) -> bool:
        return (self.etcd.mode is EtcdMode.EXTERNAL) or (self.nats.mode is NatsMode.EXTERNAL)

    @model_validator(mode="after")
    def _data_dir_is_absolute(self) -> Coordination:
        # Absolute and plain: it is used as written on the head node, never expanded.
        if self.data_dir is not None and not _DATA_DIR_RE.fullmatch(self.data_dir):
            raise ValueError(f"coordination.data_dir {self.data_dir[:60]!r} is not a plain "
                             "absolute path; give a directory on the head node's local "
                             "disk, such as /tmp or /local/scratch, or leave it unset "
                             "($TMPDIR, else /tmp)")
        return self

    @model_validator(mode="after")
    def _planes_have_nats(self) -> Coordination:
        if self.nats.mode is NatsMode.OFF:
            for plane in (self.request_plane, self.event_plane):
                if plane.needs_nats:
                    raise ValueError(
                        f"{type(plane).__name__.replace('Plane', '').lower()}_plane is nats "
                        "but nats.mode is off; use tcp/zmq or turn NATS on")
        return self

