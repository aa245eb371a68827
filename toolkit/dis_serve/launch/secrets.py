"""The graph's secrets, read where the processes start and handed over only through the
environment of processes we own (`/proc/PID/environ` is its owner's; `/proc/PID/cmdline`
is everyone's): never in argv, the plan, the state file or a log.

Today: the NATS token of `coordination.nats.auth` (from its file or environment variable).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UserInputError
from ..input_file import require_regular_file
from ..render.launch_plan import NATS_TOKEN_ENV
from ..topology import NatsAuth, Topology

# A token is a line of text; anything longer is not one (and would end up in every env).
MAX_TOKEN_BYTES = 4096


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


def secret_env(topo: Topology) -> dict[str, str]:
    """Environment variables holding secrets that every process of the graph gets."""
    token = nats_token(topo.coordination.nats.auth)
    return {NATS_TOKEN_ENV: token} if token else {}
