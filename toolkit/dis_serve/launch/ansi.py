"""Terminal colour and cursor codes, removed from output that is logged or shown again."""

from __future__ import annotations

import re

# CSI sequences: colours (ESC[32m), and the private-mode ones (ESC[?25l) progress bars send.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)
