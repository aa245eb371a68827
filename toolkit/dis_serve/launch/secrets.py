"""The graph's secrets, read where the processes start and handed over only through the
environment of processes we own (`/proc/PID/environ` is its owner's; `/proc/PID/cmdline`
is everyone's): never in argv, the plan, the state file or a log.

- the NATS token of `coordination.nats.auth` (from its file or environment variable), for
  the NATS server (its config reads it from there) and Dynamo's processes;
- etcd's client certificate and key as PEM text, which is how Dynamo 1.6.1 takes them
  (ETCD_AUTH_*), for Dynamo's processes only.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserInputError
from ..files.private_path import read_own_text
from ..inputs.input_file import require_regular_file
from ..render.launch_plan import NATS_TOKEN_ENV
from ..render.tls_planes import ETCD_CLIENT_PEM_ENV, generates_nats_token, graph_pki_paths
from ..security.pki_files import TLS_DIR, nats_token_path
from ..topology import EtcdMode, NatsAuth, ProcessKind, Topology

# A token is a line of text; anything longer is not one (and would end up in every env).
MAX_TOKEN_BYTES = 4096


@dataclass(frozen=True)
class GraphSecrets:
    nats_token: str | None = field(default=None, repr=False)
    etcd_client: dict[str, str] = field(default_factory=dict, repr=False)

    def env_for(self, kind: ProcessKind) -> dict[str, str]:
        """The secret environment a process of `kind` gets (etcd: none)."""
        env = {}
        if self.nats_token and kind is ProcessKind.NATS:
            env[NATS_TOKEN_ENV] = nats_config_string(self.nats_token)
        elif self.nats_token and kind is not ProcessKind.ETCD:
            env[NATS_TOKEN_ENV] = self.nats_token
        if kind in (ProcessKind.FRONTEND, ProcessKind.WORKER, ProcessKind.PLANNER):
            env |= self.etcd_client
        return env


def nats_config_string(token: str) -> str:
    """The token as nats-server's config reads a variable: it parses the value, so a bare
    token starting with `-` or a digit and a dot ("-E..." from token_urlsafe) is a malformed
    number and the server refuses to start. A JSON string is a quoted config string."""
    return json.dumps(token)


def nats_token(auth: NatsAuth | None) -> str | None:
    """The token `coordination.nats.auth` names, or None without auth; UserInputError when
    it is missing, empty, or in a file others can read."""
    if auth is None:
        return None
    if auth.token_file is not None:
        key = "coordination.nats.auth.token_file"
        path = Path(auth.token_file).expanduser()
        require_regular_file(path, source=key, fix="write the token into that file (mode 0600)",
                             max_bytes=MAX_TOKEN_BYTES)
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            raise UserInputError(f"{path} is readable by others (mode {mode:04o})", key=key,
                                 fix=f"chmod 600 {path}")
        token = path.read_text(encoding="utf-8").strip()
    else:
        key = "coordination.nats.auth.token_env"
        token = os.environ.get(auth.token_env or "", "").strip()
        if not token:
            raise UserInputError(f"{auth.token_env} is not set in this environment", key=key,
                                 fix=f"export {auth.token_env}=<the token> before dis-serve")
    if not token:
        raise UserInputError("the NATS token is empty", key=key, fix="put the token there")
    return token


def graph_nats_token(topo: Topology, run_dir: Path) -> str | None:
    """The token the graph's NATS asks for: the topology's (`coordination.nats.auth`), or
    the one dis-serve made in the run directory (render/tls_planes.generates_nats_token)."""
    if not generates_nats_token(topo):
        return nats_token(topo.coordination.nats.auth)
    path = Path(nats_token_path(run_dir / TLS_DIR))
    try:
        return read_own_text(path).strip()
    except FileNotFoundError:
        raise UserInputError(f"{path} is missing: dis-serve makes this graph's NATS token with "
                             "its certificates", key="coordination.nats.auth",
                             fix="start the graph with `dis-serve up` (or `dis-serve render` "
                                 "for hosts) again, or set coordination.nats.auth") from None


def graph_secrets(topo: Topology, run_dir: Path) -> GraphSecrets:
    """The secrets of the graph whose run directory (certificates included) is `run_dir`."""
    etcd_client = {}
    paths = graph_pki_paths(topo.security, run_dir)
    if paths is not None and topo.coordination.etcd.mode is EtcdMode.EMBEDDED:
        etcd_client = {env: read_own_text(Path(getattr(paths, attr)))
                       for env, attr in ETCD_CLIENT_PEM_ENV.items()}
    return GraphSecrets(nats_token=graph_nats_token(topo, run_dir),
                        etcd_client=etcd_client)
