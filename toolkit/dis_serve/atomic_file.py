"""Write a file so that a reader never sees it half-written."""

from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write `text` (UTF-8) to a temporary file beside `path`, then rename it over `path`:
    readers in other processes (another shell's `status`, a resumed sweep) see the old file
    or the new one, never a torn one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
