"""The one error hierarchy the CLI catches and shows as a single line."""

from __future__ import annotations

import errno

# What a write fails with when its file system is full (or the user's quota is).
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def no_space(exc: BaseException) -> bool:
    """`exc` is a write that failed for want of disk space."""
    return isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS


class DisServeError(Exception):
    """Base for every error a user can act on. `exit_code` is what the CLI exits with."""

    exit_code = 1


class UserInputError(DisServeError):
    """Bad input: a file, key or flag the user must change. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, key: str | None = None,
                 fix: str | None = None) -> None:
        self.source = source
        self.key = key
        self.fix = fix
        self.detail = message
        parts = []
        if source:
            parts.append(f"{source}:")
        if key:
            parts.append(f"{key}:")
        parts.append(message)
        text = " ".join(parts)
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


class PreflightError(DisServeError):
    """The machine cannot run this graph as written (port taken, binary missing). Exit code 2."""

    exit_code = 2


class RunError(DisServeError):
    """A graph, benchmark or plan failed while running. Exit code 1."""

    exit_code = 1
