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
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a half-written copy on a full disk holds its space
        raise


def overwrite_in_place(path: Path, text: str) -> None:
    """Replace the text of the existing file `path` in its own blocks: where a full disk has
    no room for write_atomic's second copy, truncating frees the old blocks the new text
    then takes. A reader may see it torn meanwhile (and says so: rundir.UnreadableState)."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "w", encoding="utf-8") as file:
        file.truncate(0)
        file.write(text)
