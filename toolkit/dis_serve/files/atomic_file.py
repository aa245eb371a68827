"""Write a file so that a reader never sees it half-written."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `text` (UTF-8) to a temporary file beside `path`, then rename it over `path`:
    readers in other processes (another shell's `status`, a resumed sweep) see the old file
    or the new one, never a torn one. A new file gets `mode` (less the umask)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.write(text)
    tmp.replace(path)
