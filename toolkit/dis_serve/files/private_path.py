"""Directories and files only their owner can touch: the run root and everything under it.

On a shared login or compute node another user can make the run root, a run directory or a
link inside one before we do. We refuse those instead of using or following them: a forged
`state.json` would make `down` signal someone else's process, and a `previous` link would
carry old logs (prompts) to wherever it points. Every check looks at the path itself
(`lstat`, `O_NOFOLLOW`), never at what a link leads to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import stat
from pathlib import Path

from ..errors import UserInputError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
# Group- or world-writable: anyone in that group (or anyone) could swap what is inside.
_WRITABLE_BY_OTHERS = stat.S_IWGRP | stat.S_IWOTH


def _user(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


def _refuse_link(path: Path) -> UserInputError:
    return UserInputError(f"{path} is a symbolic link, which dis-serve does not follow",
                          fix=f"remove it (rm {path}); dis-serve makes a plain directory "
                              "or file there")


def check_trusted(path: Path, what: str, *, directory: bool = True) -> None:
    """UserInputError (one line: path, owner or mode, fix) unless `path` is missing or is a
    directory (or a regular file) owned by this user that no one else may write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise _refuse_link(path)
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        raise UserInputError(f"{what} {path} is not a " + ("directory" if directory else
                                                           "regular file"),
                             fix=f"move it away; dis-serve makes its own {what} there")
    if st.st_uid != os.geteuid():
        raise UserInputError(f"{what} {path} is owned by {_user(st.st_uid)}, not by you "
                             f"({_user(os.geteuid())})",
                             fix="use a directory of your own (set DIS_SERVE_HOME, e.g. "
                                 "DIS_SERVE_HOME=~/.dis-serve) or have its owner remove it")
    if st.st_mode & _WRITABLE_BY_OTHERS:
        raise UserInputError(f"{what} {path} is writable by others "
                             f"(mode {stat.S_IMODE(st.st_mode):04o})",
                             fix=f"chmod go-w {path} (or chmod 700 {path})")


def ensure_private_dir(path: Path, what: str) -> None:
    """Make `path` (mode 0700; its parent must exist) or check the one there is ours; then
    set it to 0700."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, PRIVATE_DIR)
    check_trusted(path, what)
    os.chmod(path, PRIVATE_DIR)  # not a link: check_trusted refuses those


def open_private(path: Path, flags: int, mode: int = PRIVATE_FILE) -> int:
    """os.open that never follows a link at `path` (UserInputError instead) and makes new
    files with `mode`."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _refuse_link(path) from None
        raise


def read_own_text(path: Path) -> str:
    """The text of a regular file of this user's, not read through a link. OSError when it
    is missing; UserInputError when it is a link or someone else's."""
    fd = open_private(path, os.O_RDONLY)
    with os.fdopen(fd, "rb") as file:
        st = os.fstat(file.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise UserInputError(f"{path} is owned by {_user(st.st_uid)}, not by you, or "
                                 "is not a regular file",
                                 fix="remove it; dis-serve only reads the files it wrote")
        return file.read().decode("utf-8")


def copy_private(source: Path, target: Path) -> None:
    """Copy `source` to `target` (both not followed if links) as a new 0600 file, replacing
    `target` by a rename."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with (os.fdopen(open_private(source, os.O_RDONLY), "rb") as src,
          os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as dst):
        shutil.copyfileobj(src, dst)
    os.replace(tmp, target)
