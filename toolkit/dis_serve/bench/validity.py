"""Whether a sweep point measured what it claims to: a point that generated nothing, lost more
requests than the scenario allows, or stopped short of an output length the scenario fixes is
not a measurement of the graph's speed, however good its numbers look (a run with "Total
generated tokens: 0" once went out as a success: srt-slurm #429).

Validity is judged from a point's saved result and its scenario, never stored beside them, so
results and baselines written before this check are judged by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import DisServeError
from .metrics import BenchResult, PointResult
from .scenario import Scenario


class InvalidRunError(DisServeError):
    """At least one sweep point is invalid (its results are written, and marked). Exit code 1."""

    exit_code = 1


@dataclass(frozen=True)
class PointVerdict:
    load: str
    problems: tuple[str, ...]

    @property
    def valid(self) -> bool:
        return not self.problems


def error_pct(point: PointResult) -> float:
    """Failed requests in % of all the point sent (completed + failed)."""
    sent = point.aiperf.completed_requests + point.aiperf.errors
    return 0.0 if sent == 0 else 100.0 * point.aiperf.errors / sent


def point_problems(scenario: Scenario, point: PointResult) -> tuple[str, ...]:
    """Why the point is invalid, one short phrase per reason; empty when it is valid."""
    problems = []
    summary = point.aiperf
    if summary.completed_requests == 0 or summary.output_tokens_mean <= 0 \
            or summary.output_token_throughput <= 0:
        problems.append("no output tokens were generated")
    share = error_pct(point)
    if share > scenario.max_error_pct:
        problems.append(f"{summary.errors} of {summary.completed_requests + summary.errors} "
                        f"requests failed ({share:.1f}%, the scenario allows "
                        f"{scenario.max_error_pct:g}%)")
    wanted = scenario.fixed_output_tokens
    shortest = summary.output_tokens_min if summary.output_tokens_min is not None \
        else summary.output_tokens_mean
    if wanted is not None and summary.completed_requests and 0 < shortest < wanted:
        problems.append(f"outputs as short as {shortest:g} tokens where the scenario fixes "
                        f"{wanted} (the server stopped early: ignore_eos not honoured?)")
    return tuple(problems)


def judge(result: BenchResult) -> list[PointVerdict]:
    """Every point of the run, in sweep order."""
    return [PointVerdict(load=p.point.label, problems=point_problems(result.scenario, p))
            for p in result.points]


def invalid_points(result: BenchResult) -> list[PointVerdict]:
    return [v for v in judge(result) if not v.valid]


def describe(verdicts: list[PointVerdict]) -> str:
    return "; ".join(f"{v.load}: {', '.join(v.problems)}" for v in verdicts)


def enforce_valid(result: BenchResult, report: str) -> None:
    """Raise InvalidRunError naming every invalid point and where its report is."""
    bad = invalid_points(result)
    if bad:
        raise InvalidRunError(f"{len(bad)} of {len(result.points)} point(s) invalid "
                              f"({describe(bad)}); see {report}")
