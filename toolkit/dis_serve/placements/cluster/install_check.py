"""The check every multi-node script makes before an agent starts: the Python that runs
`python -m dis_serve agent` on the node imports dis-serve, and the very version that rendered
the script (a node with another, or none, would run agents that disagree with the plan
beside them). One line on stderr and exit 1 otherwise. Pure: text out."""

from __future__ import annotations

from ... import __version__
from ...render.shell_words import runtime, word

FOUND = "DIS_SERVE_FOUND"
# Prints the dis-serve version that Python imports (nothing on a Python without it).
_PROBE = "import dis_serve; print(dis_serve.__version__)"


def probe_words(python: str) -> str:
    """The command that prints the version `python` imports."""
    return f"{word(python)} -c {word(_PROBE)}"


def version_check_lines(python: str, where: str, probe: str | None = None) -> list[str]:
    """Fail in one line unless `probe` (default: `python` run here) prints this version;
    `where` names the node in the message (run-time variables allowed)."""
    command = probe or probe_words(python)
    problem = (f"{where}: {python} has no dis-serve {__version__} (found: "
               f"{runtime(FOUND)}); this script was rendered by dis-serve {__version__}: "
               f"install that version where the nodes run {python} (a virtual environment "
               "on storage every node mounts, or the nodes' own), or render it again with "
               "the one they have")
    return [f'{FOUND}="$({command} 2>/dev/null || true)"; {FOUND}="${{{FOUND}:-none}}"',
            f'[ "${FOUND}" = {word(__version__)} ] || {{ echo {word(problem)} >&2; exit 1; }}']
