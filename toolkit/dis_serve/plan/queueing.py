"""Waiting times in a pool of identical servers fed by Poisson arrivals (Erlang C).

The planner needs two numbers per pool at a given request rate: the mean wait before a
request starts service and the 90th-percentile wait. Both come from the M/M/c model with the
Allen-Cunneen correction for less variable service: a prefill worker serving prompts of one
length is close to deterministic (squared coefficient of variation 0, which halves the
wait); a decode slot held for a whole generation is treated the same way. The waiting time
of a delayed request is close to exponential with mean 1 / (c*mu - lambda) scaled by that
correction, which gives the percentile. Dynamo's replay checks every plan against a real
scheduler afterwards, so these are first-order estimates, not the verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

# Squared coefficient of variation of service times: 0 = deterministic (same-length prompts).
DETERMINISTIC_SERVICE_SCV = 0.0


def erlang_c(servers: int, offered_load: float) -> float:
    """Probability that an arrival waits: c servers, offered load a = lambda / mu (< c)."""
    if offered_load <= 0:
        return 0.0
    if offered_load >= servers:
        return 1.0
    if servers > EXACT_SERVERS_LIMIT:
        return _halfin_whitt(servers, offered_load)
    # Erlang B by its stable recursion, then C from B; unlike a^c / c! it never overflows.
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    rho = offered_load / servers
    return b / (1.0 - rho * (1.0 - b))


# Above this many servers the exact recursion costs more than the planner can spend per
# evaluation, and the many-server limit below is within a few percent of it.
EXACT_SERVERS_LIMIT = 200


def _halfin_whitt(servers: int, offered_load: float) -> float:
    """Halfin and Whitt's many-server limit: P(wait) = 1 / (1 + beta * Phi(beta) / phi(beta))
    with beta = (c - a) / sqrt(a)."""
    beta = (servers - offered_load) / math.sqrt(offered_load)
    if beta > 8.0:
        return 0.0
    phi = math.exp(-beta * beta / 2.0) / math.sqrt(2.0 * math.pi)
    cdf = 0.5 * (1.0 + math.erf(beta / math.sqrt(2.0)))
    return 1.0 / (1.0 + beta * cdf / phi)


@dataclass(frozen=True)
class Wait:
    """Queueing delay before service starts, in milliseconds."""

    mean_ms: float
    p90_ms: float
    utilization: float
    delayed: float = 0.0
    """Share of arrivals that find every server busy."""
    delayed_mean_ms: float = 0.0
    """Mean wait of an arrival that finds every server busy."""

    @property
    def stable(self) -> bool:
        return self.utilization < 1.0

    def tail_ms(self, share: float) -> float:
        """The wait that `share` of arrivals stay within: P(W > t) = C exp(-t / delayed
        mean), zero unless more than 1 - share of arrivals wait (`p90_ms` at 0.9)."""
        if not self.stable:
            return math.inf
        missed = 1.0 - share
        return self.delayed_mean_ms * math.log(self.delayed / missed) if (
            self.delayed > missed) else 0.0


UNSTABLE = Wait(math.inf, math.inf, math.inf, 1.0, math.inf)


def pool_wait(*, servers: int, service_ms: float, rate_per_s: float,
              service_scv: float = DETERMINISTIC_SERVICE_SCV) -> Wait:
    """Wait in a pool of `servers` parallel servers, each busy `service_ms` per request."""
    if rate_per_s <= 0:
        return Wait(0.0, 0.0, 0.0)
    mu = 1000.0 / service_ms
    capacity = servers * mu
    utilization = rate_per_s / capacity
    if utilization >= 1.0:
        return UNSTABLE
    delayed = erlang_c(servers, rate_per_s / mu)
    scale = (1.0 + service_scv) / 2.0
    delayed_mean_ms = 1000.0 * scale / (capacity - rate_per_s)
    wait = Wait(delayed * delayed_mean_ms, 0.0, utilization, delayed, delayed_mean_ms)
    return replace(wait, p90_ms=wait.tail_ms(0.9))
