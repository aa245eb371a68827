"""What `render` wrote in each placement's directory, so that the next render of that
placement removes the files it no longer writes (the script of a node the topology dropped,
the engine config of a pool it no longer has) and nothing else: `.rendered.json` in the
output directory lists, per placement, each file written in its directory.

Files not on the list stay: what the user put there, and what is made when written rather
than rendered (the graph's CA, the mocker's model card, Kubernetes' Secrets file), which its
writer keeps or replaces itself. A directory rendered before the list existed has none, so
its files all stay once; a placement this render leaves out keeps its directory and its
entry as they were."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..files.atomic_file import write_atomic
from ..files.private_path import PRIVATE_FILE

MANIFEST_FILE = ".rendered.json"


def listed(out_dir: Path) -> dict[str, set[str]]:
    """Per placement directory, the files the last render wrote there (none where the list
    is missing or unreadable); only names that stay inside their directory."""
    try:
        entries = json.loads((out_dir / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {target: {name for name in names if isinstance(name, str) and _inside(name)}
            for target, names in entries.items()
            if _inside(target) and "/" not in target and isinstance(names, list)}


def _inside(name: str) -> bool:
    relative = Path(name)
    return not relative.is_absolute() and ".." not in relative.parts and name not in ("", ".")


def replace_listed(out_dir: Path, written: dict[str, set[str]]) -> list[Path]:
    """For each placement directory rendered now (`written`: its files, relative to it):
    remove what the last render listed there but this one did not write (and the
    subdirectories that leaves empty); then list what was written. The paths removed."""
    before = listed(out_dir)
    removed = []
    for target, names in written.items():
        directory = out_dir / target
        for name in sorted(before.get(target, set()) - names):
            if _remove(directory, directory / name):
                removed.append(directory / name)
    entries = {name: sorted(files) for name, files in (before | written).items()}
    write_atomic(out_dir / MANIFEST_FILE, json.dumps(entries, indent=1, sort_keys=True) + "\n",
                 PRIVATE_FILE)
    return removed


def _remove(directory: Path, path: Path) -> bool:
    if not path.parent.resolve().is_relative_to(directory.resolve()):
        return False  # through a link out of the directory: not render's to remove
    if not (path.is_symlink() or path.is_file()):
        return False
    path.unlink()
    folder = path.parent
    while folder != directory and folder.is_relative_to(directory):
        try:
            os.rmdir(folder)
        except OSError:  # not empty (or already gone): stop here
            break
        folder = folder.parent
    return True
