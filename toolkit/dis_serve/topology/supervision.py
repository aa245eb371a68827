"""How `dis-serve up` supervises its processes: restart policy per kind, worker liveness."""

from __future__ import annotations

from pydantic import Field

from .base import Strict


class Restart(Strict):
    """How the supervisor treats one kind of process that exits (any exit: they are meant
    to run until stopped, so even status 0 counts), like systemd's Restart=always with a
    StartLimitBurst, or a Kubernetes pod's CrashLoopBackOff."""

    enabled: bool = Field(
        default=True, description="Restart it (false: its first exit fails the graph).")
    max_failures: int = Field(
        default=5, ge=1, le=1000,
        description="Exits within window_s after which this process is given up (the rest "
                    "of the graph keeps serving if it can, reported as degraded).")
    window_s: float = Field(default=300.0, gt=0, le=86400,
                            description="The window max_failures counts exits in.")
    backoff_base_s: float = Field(
        default=1.0, gt=0, le=600,
        description="Wait before the first restart; doubled for each further exit in a row.")
    backoff_cap_s: float = Field(default=30.0, gt=0, le=3600,
                                 description="Longest wait before a restart.")
    retry_given_up_s: float | None = Field(
        default=30.0, gt=0, le=86400,
        description="A process given up is tried once more this many seconds later (a try "
                    "that gets ready restores its crash budget; one that exits gives it up "
                    "for another period), so an outage longer than the budget ends by itself "
                    "once its cause is gone; null: it stays down until `dis-serve down`.")

    def delay(self, consecutive_failures: int) -> float:
        exponent = max(0, consecutive_failures - 1)
        return min(self.backoff_cap_s, self.backoff_base_s * (2 ** min(exponent, 30)))


class Liveness(Strict):
    """When a running process that does not answer its health probe is restarted: a worker
    after `failures` unanswered probes, etcd and NATS after twice that (the graph is degraded
    from the first); the frontend is never restarted for a slow probe."""

    failures: int = Field(
        default=3, ge=1, le=100,
        description="Unanswered health probes in a row (after it was ready once) that get a "
                    "worker restarted; etcd and NATS take twice as many.")
    period_s: float = Field(default=1.0, gt=0, le=60, description="Seconds between probes.")
    timeout_s: float = Field(default=1.0, gt=0, le=60,
                             description="A probe not answered within this fails.")


def _infra_restart() -> Restart:
    # etcd, NATS and the frontend start in about a second, so short waits; but what kills
    # them is often outside (a port another process holds for a while): 10 exits in 60 s
    # with waits of 1, 2, 4, then 5 s last about 37 s of outage before giving up.
    return Restart(backoff_base_s=1.0, backoff_cap_s=5.0, max_failures=10, window_s=60.0)


class Supervision(Strict):
    """Restart policy per process kind, and the workers' liveness check (`dis-serve up`)."""

    etcd: Restart = Field(default_factory=_infra_restart,
                          description="etcd (its data directory is kept across restarts).")
    nats: Restart = Field(default_factory=_infra_restart,
                          description="NATS (its JetStream directory is kept).")
    frontend: Restart = Field(default_factory=_infra_restart,
                              description="The frontend with its router.")
    workers: Restart = Field(default_factory=Restart, description="Every worker.")
    planner: Restart = Field(default_factory=_infra_restart,
                             description="Dynamo's planner (`autoscale`).")
    liveness: Liveness = Field(default_factory=Liveness,
                               description="Liveness of workers, etcd and NATS.")
    drain_timeout_s: float = Field(
        default=60.0, gt=0, le=3600,
        description="How long a worker that leaves the graph (`scale`, `apply`, the planner) "
                    "has to finish its requests after SIGTERM, which takes it out of routing "
                    "at once (Dynamo 1.6.1 unregisters it, then waits for its requests; "
                    "TensorRT-LLM first waits 5 s more, DYN_GRACEFUL_SHUTDOWN_GRACE_PERIOD_SECS)"
                    "; then SIGKILL, and the frontend's --migration-limit moves what is left "
                    "to another worker.")
