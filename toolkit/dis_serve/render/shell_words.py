"""The words and shared pieces of every generated bash script: each value quoted, run-time
variables expanded, readiness waits and ordered stops written once.

A renderer that cannot know a value until the script runs (a Slurm node's address, the run
directory) puts `runtime("NAME")` where it belongs; `word` quotes everything around it and
expands the variable as "${NAME}", so no value is ever pasted unquoted. Every value of the
topology reaches a script through `word` (arguments, assignments, echo text) or `comment`
(a `#` line), never through an f-string of its own: one mechanism to get right.

A word is always on one line: text with a line break or another control character is written
in bash's $'...' form, so a script stays one command per line (a line break in a quoted word
is correct bash, but not for `sbatch`'s directive parser, a log line or a reader's eye).
"""

from __future__ import annotations

import json
import math
import re
import shlex

from ..security.pki_files import EndpointTls
from .launch_plan import ProbeKind, ProcessSpec
from .model_ready import routed_chat, routed_chat_url

_MARK = "\x1e"
_RUNTIME = re.compile(f"{_MARK}([A-Za-z_][A-Za-z0-9_]*){_MARK}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Characters a word must not carry raw: they would break the line (or the terminal). The
# run-time marker (\x1e) is taken out by `word` before these are looked for.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_OR_QUOTE = re.compile(r"[\x00-\x1f\x7f'\\]")


def runtime(name: str) -> str:
    """A placeholder for the shell variable `name`, expanded where the script runs."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a shell variable name: {name!r}")
    return f"{_MARK}{name}{_MARK}"


def _literal(text: str) -> str:
    """Literal text as one shell word on one line."""
    if not _CONTROL.search(text):
        return shlex.quote(text)
    # $'...': backslash and single quote escaped, control characters as \xHH.
    return "$'" + _CONTROL_OR_QUOTE.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text) + "'"


def word(value: str) -> str:
    """One shell word: literal text single-quoted, run-time variables double-quoted."""
    parts = _RUNTIME.split(value)
    if len(parts) == 1:
        return _literal(value)
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f'"${{{part}}}"')
        elif part:
            out.append(_literal(part))
    return "".join(out)


def echo_line(*parts: str, stream: str = "") -> str:
    """`echo` of these pieces of text (run-time variables allowed) as one quoted word;
    `stream` ">&2" for stderr."""
    return f"echo {word(''.join(parts))}" + (f" {stream}" if stream else "")


def comment(text: str) -> str:
    """Text for a `#` line: on one line (a line break would end the comment and run the
    rest as a command), run-time variables shown as $NAME."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", readable(text))


def command_words(spec: ProcessSpec) -> str:
    """`env K=V ... argv...` for a process, every value a quoted word."""
    env = " ".join(f"{k}={word(v)}" for k, v in sorted(spec.env.items()))
    command = " ".join(word(a) for a in spec.argv)
    return f"env {env} {command}" if env else command


def checkpoint_check(path: str) -> str:
    """A bash condition: `path` is a checkpoint directory (config.json and safetensors)."""
    quoted = shlex.quote(path)
    return f"test -f {quoted}/config.json && compgen -G {quoted}'/*.safetensors' >/dev/null"


# CAP_IPC_LOCK's bit in /proc/self/status's CapEff mask (linux/capability.h).
CAP_IPC_LOCK_BIT = 14


def memlock_check(where: str, fix: str, *, fatal: bool) -> str:
    """One POSIX sh line, the same on every target: UCX and NIXL pin (register) the KV-cache
    buffers they send, which needs an unlimited locked-memory limit or CAP_IPC_LOCK in
    effect (a non-root user holds it in no set, whatever the container asks:
    kubernetes/kubernetes#56374). Neither: one line on stderr naming `where` and `fix`, and
    exit 1 when `fatal` (RDMA), else carry on."""
    warning = echo_line(f"{where}: locked memory is limited to ", runtime("limit"),
                        f" KiB and CAP_IPC_LOCK is not in effect; UCX/NIXL pin the KV-cache "
                        f"buffers they send: {fix}", stream=">&2")
    return ('limit=$(ulimit -l); cap=0; while read -r key value; do '
            '[ "$key" = CapEff: ] && cap=$value; done < /proc/self/status; '
            f'if [ "$limit" != unlimited ] && [ $(( 0x$cap >> {CAP_IPC_LOCK_BIT} & 1 )) = 0 ]; '
            f"then {warning}" + ("; exit 1" if fatal else "") + "; fi")


def readable(text: str) -> str:
    """Text for a comment or a README: run-time variables shown as $NAME, and on one line
    (a line break in a value must never end a comment and start a command)."""
    return " ".join(_RUNTIME.sub(lambda m: f"${m.group(1)}", text).splitlines())


def resolve_runtime(text: str, values: dict[str, str]) -> str:
    """Text with its run-time variables replaced by the values the script found."""
    return _RUNTIME.sub(lambda m: values.get(m.group(1), m.group(0)), text)


def runtime_names(values: list[str]) -> list[str]:
    """The run-time variables these values use, sorted."""
    return sorted({name for value in values for name in _RUNTIME.findall(value)})


def private_files_lines() -> list[str]:
    """Every file the script and its processes make (logs, config, the endpoint file) is
    its user's alone: logs hold prompts."""
    return ["umask 077"]


def tcp_check(host: str, port: int) -> str:
    """A bash command that succeeds once host:port accepts a connection."""
    return f"(exec 3<>/dev/tcp/{word(host)}/{port}) 2>/dev/null"


def curl_tls_words(tls: EndpointTls | None) -> str:
    """curl's options for an https endpoint of the graph: its CA (curl's own store does not
    hold it) and, when the frontend asks for one, the client certificate; each followed by
    a space."""
    if tls is None:
        return ""
    files = ["--cacert", tls.ca_cert]
    if tls.client_cert is not None:
        files += ["--cert", tls.client_cert, "--key", tls.client_key or tls.client_cert]
    return "".join(f"{word(f)} " for f in files)


def probe_check(spec: ProcessSpec, default_host: str = "127.0.0.1") -> str:
    """A bash command that succeeds once the process is ready."""
    probe = spec.readiness
    if probe.kind is ProbeKind.RUNNING:
        return "true"
    if probe.kind is ProbeKind.HTTP:
        through = f"--unix-socket {word(probe.socket)} " if probe.socket else ""
        return (f"curl -fsS -o /dev/null {through}{curl_tls_words(probe.tls)}"
                f"{word(str(probe.url))}")
    assert probe.port is not None
    return tcp_check(probe.host or default_host, probe.port)


def routed_check(frontend: ProcessSpec, model_name: str) -> str:
    """A bash command that succeeds once the frontend routes the model (model_ready.py): its
    model-ready probe, then a one-token chat."""
    probe = frontend.readiness
    chat = json.dumps(routed_chat(model_name), separators=(",", ":"))
    return (f"{probe_check(frontend)} && curl -fsS -o /dev/null {curl_tls_words(probe.tls)}"
            f"-H 'Content-Type: application/json' -d {word(chat)} "
            f"{word(routed_chat_url(str(probe.url)))}")


def wait_line(spec: ProcessSpec, check: str | None = None, pid: str = '"$!"') -> str:
    """`wait_ready` for the process just started in the background (`$!`, or the shell
    word `pid`), on its own probe unless `check` is given."""
    return f"wait_ready {word(spec.name)} {pid} {word(check or probe_check(spec))}"


def pid_line(spec: ProcessSpec) -> str:
    """Remember the process just started in the background, in its stop stage."""
    return "INFRA_PIDS+=($!)" if spec.kind.is_coordination else "PIDS+=($!)"


def wait_ready_function(timeout_s: float) -> list[str]:
    """`wait_ready NAME PID CHECK`: poll CHECK ten times a second until it passes, failing at
    once (naming the log) when PID has exited, or after `timeout_s` (the model's startup
    budget, startup_budget.py). The checks are a TCP connect or a local curl, quiet while
    they fail: a log of thousands of refused connections hides the one line that matters."""
    budget = math.ceil(timeout_s)
    return [
        f"wait_ready() {{  # NAME PID CHECK: poll CHECK for up to {budget} s while PID runs",
        # SECONDS counts whole seconds: one more, so the wait is never shorter than budgeted.
        f"  local deadline=$((SECONDS + {budget + 1}))",
        "  while ((SECONDS < deadline)); do",
        "    if eval \"$3\" 2>/dev/null; then echo \"ready: $1\"; return 0; fi",
        "    if ! kill -0 \"$2\" 2>/dev/null; then",
        "      echo \"$1 exited before it was ready (see $LOGS/$1.log)\" >&2; exit 1",
        "    fi",
        "    sleep 0.1",
        "  done",
        f"  echo \"not ready after {budget} s: $1 (see $LOGS/$1.log)\" >&2; exit 1",
        "}",
    ]


def stop_function(grace_s: int = 5) -> list[str]:
    """`stop_all`: SIGTERM to the Dynamo processes (PIDS) in reverse start order, a grace
    period, SIGKILL to what is left; then the same for etcd and NATS (INFRA_PIDS), which the
    others deregister from on their way out."""
    return [
        "PIDS=()",
        "INFRA_PIDS=()",
        "stop_pids() {  # PID...: SIGTERM in reverse order, wait, SIGKILL what is left",
        "  local pids=(\"$@\") i alive",
        "  for ((i=${#pids[@]}-1; i>=0; i--)); do kill -TERM \"${pids[i]}\" 2>/dev/null || true;"
        " done",
        f"  for _ in $(seq 1 {grace_s * 10}); do",
        "    alive=0; for i in \"${pids[@]}\"; do kill -0 \"$i\" 2>/dev/null && alive=1; done",
        "    [ \"$alive\" = 0 ] && break; sleep 0.1",
        "  done",
        "  for i in \"${pids[@]}\"; do kill -KILL \"$i\" 2>/dev/null || true; done",
        "}",
        "stop_all() {",
        "  trap - EXIT",
        "  stop_pids \"${PIDS[@]}\"",
        "  stop_pids \"${INFRA_PIDS[@]}\"",
        "}",
        # A signal ends the script (not just the command it was waiting on); leaving runs
        # stop_all, whatever the reason.
        "trap stop_all EXIT",
        "trap 'exit 143' INT TERM",
    ]
