"""A plan is offered only once Dynamo's replay shows it holds.

The best deployment of each mode is replayed; if fewer requests meet the SLA than its
percentile promises (nine in ten), the planner backs off (the same deployment at a little
less load, then the next candidates; for a target rate, the next candidates and one more
worker where the deployment runs out first) and replays again, up to MAX_ATTEMPTS times.
The verdict between the modes is then taken on what passed."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from ..topology import Mode, PoolRole
from .mocker_profile import profile_tables, write_profile
from .recommend import PlanResult, decide
from .replay import ReplayResult, replay_plan
from .request import Objective, Workload
from .search import (
    BACKOFF_STEP,
    Candidate,
    PoolPlan,
    SearchSpace,
    at_rate,
    most_goodput_first,
    with_one_more_worker,
)

MAX_ATTEMPTS = 7
# Objective (b) backs off by planning the same deployment for this share of its rate.
HEADROOM_STEPS = tuple(round(1 - i * BACKOFF_STEP, 2) for i in range(MAX_ATTEMPTS))
CANDIDATES_TRIED = 3


def throughput_shortfall(cand: Candidate, rep: ReplayResult, workload: Workload) -> float:
    """How far the replay's throughput fell short of the plan's (0: none). A closed loop is
    held to the planned rate; Poisson arrivals to what the arrival process produced in the
    window where that was less (its randomness is not the deployment's doing)."""
    expected = cand.rate if workload.closed_loop else min(cand.rate, rep.arrival_rate)
    return max(0.0, 1.0 - rep.served_rate / expected) if expected > 0 else 0.0


def counting_error(rep: ReplayResult, workload: Workload) -> float:
    """What a window's throughput can show by chance, as a share (two standard errors):
    with open arrivals the requests in the system at the window's two ends differ by about
    sqrt(2 L) (L its mean number in the system) however well the deployment keeps up, so the
    served count differs from the arrivals by that much; a closed loop holds L fixed."""
    if workload.closed_loop or rep.window_arrivals <= 0:
        return 0.0
    return 2.0 * math.sqrt(2.0 * rep.in_system) / rep.window_arrivals


def replay_failure(cand: Candidate, rep: ReplayResult, workload: Workload) -> str | None:
    """Why a replay fails the plan (None: it holds): too few requests met the SLA, the run
    never settled into a steady state (latencies so far above the prediction that the
    requests the planner sized it with did not span them; a trace is replayed as it is, so
    only a synthetic run is held to this), or it served less than planned by more than one
    back-off step beyond what its window can resolve. Each fails alike, at a loose SLA too."""
    if rep.sla_met_share < rep.sla_share:
        return (f"met the SLA for {rep.sla_met_share:.0%} of replayed requests, short of the "
                f"{rep.sla_share:.0%} it promises")
    if not rep.steady:
        if workload.trace is None:
            return ("never reached a steady state in replay (its latencies outlasted the run "
                    "sized from the prediction)")
        return None
    shortfall, noise = throughput_shortfall(cand, rep, workload), counting_error(rep, workload)
    if shortfall > BACKOFF_STEP + noise:
        return (f"served {rep.served_rate:.2f} req/s in replay, {shortfall:.1%} short of the "
                f"planned {cand.rate:.2f} (more than one {BACKOFF_STEP:.0%} back-off step"
                + (f" beyond the window's {noise:.1%} counting error)" if noise else ")"))
    return None


@dataclass(frozen=True)
class Attempt:
    candidate: Candidate
    replay: ReplayResult
    profile: Path
    failure: str | None = None
    """Why the replay failed the deployment (`replay_failure`); None: it held."""

    @property
    def passed(self) -> bool:
        return self.failure is None


@dataclass(frozen=True)
class Verification:
    """Every replay one mode took, in order; the last is the one that passed, if any did."""

    mode: Mode
    attempts: tuple[Attempt, ...]

    @property
    def passed(self) -> Attempt | None:
        return next((a for a in self.attempts if a.passed), None)

    @property
    def best(self) -> Attempt:
        """What passed, else the attempt that came closest."""
        return self.passed or max(self.attempts, key=closeness)


def closeness(attempt: Attempt) -> tuple[float, float]:
    """Which failed attempt came closest: the SLA share first, then the throughput kept."""
    return (min(attempt.replay.sla_met_share, attempt.replay.sla_share),
            attempt.replay.served_rate / attempt.candidate.rate)


def verify_mode(result: PlanResult, mode: Mode, out_dir: Path) -> Verification | None:
    """Replay the mode's best candidates until one meets the SLA (None: the mode has none)."""
    ranked = _distinct_best(result, mode)
    if not ranked:
        return None
    attempts: list[Attempt] = []
    for number, cand in enumerate(_fallbacks(result.space, ranked, result.request.objective)):
        if number >= MAX_ATTEMPTS:
            break
        profile = write_profile(
            profile_tables(result.model, cand, result.workload.isl, result.space.seq_len),
            out_dir / f"mocker-profile-{mode.value}-{number}.npz")
        request = result.request
        replayed = replay_plan(request.target(), cand, profile, result.workload,
                               ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                               requests=request.replay_requests,
                               gpus_per_node=request.gpus_per_node,
                               sla_share=request.sla_share)
        attempts.append(Attempt(cand, replayed, profile,
                                replay_failure(cand, replayed, result.workload)))
        if attempts[-1].passed:
            break
    return Verification(mode, tuple(attempts))


def _distinct_best(result: PlanResult, mode: Mode) -> list[Candidate]:
    """The mode's candidates best first, one per configuration that behaves differently in
    the replay (for aggregated workers the per-step prompt budget is one: a deployment that
    fails with large steps may pass with smaller ones)."""
    if result.request.objective is Objective.MOST_GOODPUT:
        order = most_goodput_first(c for c in result.candidates if c.mode is mode)
    else:
        order = sorted((c for c in result.candidates if c.mode is mode),
                       key=lambda c: (c.gpus, c.prediction.ttft_p90_ms))
    seen, out = set(), []
    for cand in order:
        ident = tuple((p.role, p.workers, p.tp, _replay_knob(p)) for p in cand.pools)
        if ident not in seen:
            seen.add(ident)
            out.append(cand)
    return out


def _replay_knob(pool: PoolPlan) -> int:
    """What else about a pool changes how it fares in the replay: an aggregated worker's
    per-step prompt budget, a decode worker's batch cap (a prefill worker's batch hardly
    does: it runs full only when prompts queue)."""
    if pool.role is PoolRole.AGG:
        return pool.max_num_tokens - pool.max_batch
    return pool.max_batch if pool.role is PoolRole.DECODE else 0


def _fallbacks(space: SearchSpace, ranked: list[Candidate],
               objective: Objective) -> list[Candidate]:
    """What to replay, best first: for most goodput, the top candidates at full and reduced
    load by the goodput they promise; for a rate, the top candidates and each with one more
    worker where it runs out first, by GPUs."""
    out: list[Candidate] = []
    for cand in ranked[:CANDIDATES_TRIED]:
        if objective is Objective.MOST_GOODPUT:
            # A trace replays at its own timestamps: only other deployments can help there.
            steps = HEADROOM_STEPS if space.workload.trace is None else HEADROOM_STEPS[:1]
            out += [c for f in steps if (c := at_rate(space, cand, cand.rate * f))]
        else:
            out += [cand] + [c for c in [with_one_more_worker(space, cand)] if c]
    ordered = (most_goodput_first(out) if objective is Objective.MOST_GOODPUT
               else sorted(out, key=lambda c: (c.gpus, c.prediction.ttft_p90_ms)))
    seen, unique = set(), []
    for cand in ordered:
        ident = (tuple((p.role, p.workers, p.tp, p.max_batch) for p in cand.pools),
                 round(cand.rate, 6))
        if ident not in seen:
            seen.add(ident)
            unique.append(cand)
    return unique



def verified(result: PlanResult, out_dir: Path) -> tuple[PlanResult, dict[Mode, Verification]]:
    """The plan decided again on what the replay confirmed: each mode's first deployment is
    the one that passed (a mode where nothing passed drops out of the verdict, unless
    neither passed, when the closest attempt of each stays, marked failed)."""
    checks = {mode: v for mode in (Mode.DISAGG, Mode.AGG)
              if (v := verify_mode(result, mode, out_dir)) is not None}
    any_passed = any(v.passed for v in checks.values())
    fronts, tables = {}, {}
    for mode, ranked in ((Mode.DISAGG, result.disagg), (Mode.AGG, result.agg)):
        check = checks.get(mode)
        first = [] if check is None else [check.best.candidate]
        # The tables lead with what the replay confirmed; deployments it rejected go.
        tried = set() if check is None else {_shape(a.candidate) for a in check.attempts}
        tables[mode] = first + [c for c in ranked if _shape(c) not in tried]
        fronts[mode] = [] if check is None or (any_passed and check.passed is None) else first
    decided = decide(result, fronts[Mode.DISAGG], fronts[Mode.AGG])
    return replace(decided, disagg=tables[Mode.DISAGG], agg=tables[Mode.AGG]), checks


def _shape(cand: Candidate) -> tuple:
    return (cand.mode, tuple((p.role, p.workers, p.tp) for p in cand.pools))
