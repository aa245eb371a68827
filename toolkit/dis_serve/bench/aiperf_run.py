"""One sweep point = one `aiperf profile` process: its argv, and running it to the end.

The flags are AIPerf 0.13.0's (checked against its own CLI parser in
tests/unit/test_bench_aiperf_argv.py). AIPerf starts a tree of service processes, so it runs
in a session of its own and is stopped as a group: SIGINT first (AIPerf's own cancel path,
which lets its services exit cleanly), then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import collections
import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunError
from ..launch.ansi import strip_ansi
from ..launch.process import parent_death_preexec
from ..launch.stopping import signal_group, stop_processes
from ..security.pki_files import EndpointTls
from .aiperf_tls import aiperf_tls_env
from .scenario import LoadKind, Scenario, SweepPoint

EXPORT_FILE = "profile_export_aiperf.json"
SERVER_METRICS_FILE = "server_metrics_export.json"
LOG_FILE = "aiperf.log"
TAIL_LINES = 15
# AIPerf announces each phase on a NOTICE line: "Phase profiling (profiling) started | ...".
_PHASE = re.compile(r"NOTICE\s+Phase (\w+) \(\w+\) (started|complete)\b")


@dataclass(frozen=True)
class AiperfTarget:
    """Where the load goes and which Prometheus endpoints AIPerf scrapes besides the frontend."""

    url: str
    model: str
    tokenizer: str
    extra_metrics_urls: tuple[str, ...] = ()
    tls: EndpointTls | None = None  # an https frontend: see bench/aiperf_tls.py

    @property
    def env(self) -> dict[str, str]:
        """What AIPerf's environment needs to reach this target."""
        return aiperf_tls_env(self.tls)


def aiperf_executable() -> list[str]:
    """`aiperf` from the interpreter's own environment (the venv), else from PATH."""
    beside = Path(sys.executable).with_name("aiperf")
    return [str(beside)] if beside.is_file() else ["aiperf"]


def build_argv(scenario: Scenario, point: SweepPoint, target: AiperfTarget,
               artifact_dir: Path) -> list[str]:
    """The `aiperf profile` command line for one sweep point, with the per-request export
    (profile_export.jsonl) that the report's CDFs and `dis-serve chaos` read."""
    argv = [*aiperf_executable(), "profile",
            "--model", target.model,
            "--url", target.url,
            "--endpoint-type", scenario.endpoint_type.value,
            "--tokenizer", target.tokenizer,
            *dataset_args(scenario, point),
            "--prompt-corpus", scenario.prompt_corpus.value,
            "--random-seed", str(scenario.random_seed),
            "--request-timeout-seconds", f"{scenario.request_timeout_s:g}",
            "--ui-type", "none",
            "--artifact-dir", str(artifact_dir),
            # Per-request records: latency CDFs, goodput by input length, replay lag.
            "--export-level", "records",
            "--no-gpu-telemetry",
            "--server-metrics-formats", "json"]
    if scenario.streaming:
        # AIPerf checks every request against the SLA and reports goodput itself. Only
        # streamed responses have TTFT and ITL; given these SLOs without streaming, AIPerf
        # 0.13's record processor fails and the run hangs.
        argv += ["--streaming",
                 "--goodput", f"time_to_first_token:{scenario.sla.ttft_ms:g} "
                              f"inter_token_latency:{scenario.sla.itl_ms:g}"]
    if scenario.ignore_eos:
        argv += ["--extra-inputs", "ignore_eos:true"]
    argv += load_args(scenario, point)
    if target.extra_metrics_urls:
        # Last, because the flag takes every following word as a URL.
        argv += ["--server-metrics", *target.extra_metrics_urls]
    return argv


def dataset_args(scenario: Scenario, point: SweepPoint) -> list[str]:
    """What the requests look like: a trace, or synthetic prompts (shared prefixes, turns)."""
    if scenario.trace is not None:
        trace = scenario.trace
        return ["--custom-dataset-type", "mooncake_trace", "--input-file", str(trace.file),
                "--isl-block-size", str(trace.block_size)]
    assert scenario.input_tokens is not None and scenario.output_tokens is not None
    unique_tokens = scenario.input_tokens.mean
    argv = []
    if scenario.shared_prefix is not None:
        prefix = scenario.shared_prefix.prefix_tokens(scenario.input_tokens.mean)
        unique_tokens -= prefix
        argv += ["--num-prefix-prompts", str(scenario.shared_prefix.prefixes),
                 "--prefix-prompt-length", str(prefix)]
    if scenario.multi_turn is not None:
        turns = scenario.multi_turn
        argv += ["--conversation-turn-mean", str(turns.turns),
                 "--num-conversations", str(turns.conversations),
                 "--conversation-turn-delay-mean", f"{turns.turn_delay_ms:g}"]
    return ["--isl", str(unique_tokens),
            "--isl-stddev", f"{scenario.input_tokens.stddev:g}",
            "--osl", str(scenario.output_tokens.mean),
            "--osl-stddev", f"{scenario.output_tokens.stddev:g}", *argv]


def load_args(scenario: Scenario, point: SweepPoint) -> list[str]:
    """How the requests are offered: on the trace's timestamps, or at a load level."""
    if point.kind is LoadKind.SPEEDUP:
        # Timestamps from the first row: the replay starts at once, gaps kept; AIPerf
        # divides them by the speed-up and leaves the hash ids' sharing as it is.
        return ["--fixed-schedule", "--fixed-schedule-auto-offset",
                point.kind.aiperf_flag, point.aiperf_value]
    argv = [point.kind.aiperf_flag, point.aiperf_value]
    if scenario.requests is not None:
        argv += ["--request-count", str(scenario.requests)]
    else:
        argv += ["--benchmark-duration", f"{scenario.duration_s:g}"]
    if scenario.warmup_requests:
        argv += ["--warmup-request-count", str(scenario.warmup_requests)]
    return argv


@dataclass(frozen=True)
class AiperfRun:
    argv: list[str]
    returncode: int
    wall_s: float
    tail: list[str]
    log_path: Path


def run_aiperf(argv: Sequence[str], artifact_dir: Path, *, timeout_s: float,
               extra_env: dict[str, str] | None = None,
               on_phase: Callable[[str, str], None] | None = None,
               on_tick: Callable[[float], None] | None = None,
               tick_s: float = 0.5) -> AiperfRun:
    """Run AIPerf to the end and return how it went; its output goes to artifact_dir/aiperf.log.

    `on_phase(phase, event)` is called as AIPerf announces phases (warmup/profiling,
    started/complete); `on_tick(elapsed_s)` every `tick_s` while it runs. Raises RunError
    (after stopping AIPerf) when it outlives `timeout_s`; stops it and re-raises on
    KeyboardInterrupt.
    """
    artifact_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    log_path = artifact_dir / LOG_FILE
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    # HF_HUB_OFFLINE must not reach AIPerf 0.13: offline, it looks even a local tokenizer
    # directory up in the hub cache and fails.
    inherited = {k: v for k, v in os.environ.items()
                 if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env = inherited | {"NO_COLOR": "1", "TERM": "dumb", "PYTHONUNBUFFERED": "1"} | (
        extra_env or {})
    start = time.monotonic()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as log:
        # Its own session (so stopping it reaches every service), and dead with us: if
        # `bench` is SIGKILLed the kernel kills the controller, whose services AIPerf
        # already ties to it the same way.
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=parent_death_preexec(), umask=0o077,
                                text=True, encoding="utf-8", errors="replace")
        reader = threading.Thread(target=_pump, args=(proc, log, tail, on_phase), daemon=True)
        reader.start()
        try:
            while proc.poll() is None:
                elapsed = time.monotonic() - start
                if elapsed > timeout_s:
                    stop_process_group(proc)
                    reader.join(5)
                    raise RunError(f"aiperf still running after {timeout_s:g} s (the "
                                   f"scenario's point_timeout_s); stopped it; log: {log_path}")
                if on_tick is not None:
                    on_tick(elapsed)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(tick_s)
        except BaseException:
            stop_process_group(proc)
            reader.join(5)
            raise
        wall = time.monotonic() - start
        reader.join(10)
        _kill_leftovers(proc.pid)
    return AiperfRun(argv=list(argv), returncode=proc.returncode, wall_s=wall, tail=list(tail),
                     log_path=log_path)


def _pump(proc: subprocess.Popen, log, tail: collections.deque[str],
          on_phase: Callable[[str, str], None] | None) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        line = strip_ansi(raw.rstrip("\n"))
        log.write(line + "\n")
        if line.strip():
            tail.append(line)
        if on_phase is not None and (match := _PHASE.search(line)):
            on_phase(match.group(1), match.group(2))


def stop_process_group(proc: subprocess.Popen, *, interrupt_grace_s: float = 15.0,
                       term_grace_s: float = 5.0) -> None:
    """SIGINT, SIGTERM, SIGKILL to the process's group, each after the previous one's grace:
    AIPerf's service processes share the group, and none may outlive the controller."""
    stop_processes([proc.pid], term_grace_s, interrupt_grace_s=interrupt_grace_s)


def _kill_leftovers(pgid: int) -> None:
    # A service AIPerf failed to stop would keep loading the graph during the next point.
    signal_group(pgid, signal.SIGKILL)


def failure_message(run: AiperfRun, point: SweepPoint) -> str:
    """One line saying which point failed, then AIPerf's own last lines."""
    lines = "\n".join(f"  | {line}" for line in run.tail) or "  | (no output)"
    return (f"aiperf failed at {point.label} (exit {run.returncode}); its last lines:\n"
            f"{lines}\nfull log: {run.log_path}")
