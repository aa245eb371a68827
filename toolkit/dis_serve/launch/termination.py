"""Termination signals as Ctrl-C, for commands that own processes (`up`, `bench`, `chaos`)."""

from __future__ import annotations

import signal


def interrupt_on_termination() -> None:
    """SIGTERM (`kill`, `dis-serve down`) and SIGHUP (a closed terminal) raise
    KeyboardInterrupt like Ctrl-C does, so the command's cleanup (stop AIPerf's tree, stop
    the graph) runs instead of the interpreter dying on the spot. SIGINT is set too: a shell
    may start background jobs with it ignored."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)
