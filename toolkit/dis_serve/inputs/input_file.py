"""A file the user names (a topology, a scenario, a trace): a regular file, or one line that
says what it is instead.

`open()` on a FIFO blocks until someone writes, /dev/zero never ends and a directory cannot
be read: each gets a message that names it, before anything opens the path.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..errors import UserInputError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def require_regular_file(path: Path, *, source: str | None = None, key: str | None = None,
                         fix: str = "check the path", max_bytes: int | None = None,
                         limit_fix: str | None = None) -> int:
    """The size of `path` when it is a regular file (a link to one is fine) that this user
    can read, at most `max_bytes`; else UserInputError naming what it is. `source` and `key`
    name where the path was given (default: the path itself is the source)."""
    where = {"source": source or str(path), "key": key}
    subject = f"{path} " if source else ""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserInputError(f"{subject}file not found", **where, fix=fix) from None
    except OSError as exc:
        raise UserInputError(f"{subject}cannot be read ({exc.strerror})", **where,
                             fix=fix) from None
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise UserInputError(f"{subject}is {kind}, not a regular file", **where,
                             fix=f"{fix}; it must be a regular file") from None
    if not os.access(path, os.R_OK):
        raise UserInputError(f"{subject}cannot be read (permission denied)", **where, fix=fix)
    if max_bytes is not None and st.st_size > max_bytes:
        raise UserInputError(f"{subject}is {st.st_size:,} bytes, over the limit of "
                             f"{max_bytes:,}", **where, fix=limit_fix or fix)
    return st.st_size
