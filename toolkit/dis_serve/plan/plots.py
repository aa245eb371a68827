"""The plan's picture: tokens/s/GPU against tokens/s/user for every shape the search kept."""

from __future__ import annotations

import math
from pathlib import Path

from ..topology import Mode
from .recommend import PlanResult
from .to_outcome import plan_title, short_label


def pareto_png(result: PlanResult, path: Path) -> Path:
    """Both modes' frontiers, the plan, the best aggregated deployment and the fixed split."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    for mode, colour in ((Mode.AGG, "tab:blue"), (Mode.DISAGG, "tab:orange")):
        points = [(c.tokens_per_s_per_user, c.tokens_per_s_per_gpu)
                  for c in result.candidates if c.mode is mode]
        if not points:
            continue
        ax.scatter(*zip(*points, strict=True), s=14, alpha=0.35, color=colour)
        front = _frontier(points)
        ax.plot(*zip(*front, strict=True), color=colour, label=f"{mode.value} frontier")
    marks = [(result.chosen, "*", 220, "black", "plan")]
    if result.best_agg is not None and result.best_agg is not result.chosen:
        marks.append((result.best_agg, "D", 60, "tab:blue", "best agg"))
    if result.split is not None:
        marks.append((result.split, "X", 90, "tab:red", "split"))
    for cand, marker, size, colour, name in marks:
        ax.scatter([cand.tokens_per_s_per_user], [cand.tokens_per_s_per_gpu], marker=marker,
                   s=size, color=colour, label=f"{name}: {short_label(cand)}", zorder=5)
    ax.set_xlabel("tokens/s per user (1000 / ITL)")
    ax.set_ylabel("tokens/s per GPU")
    ax.set_title(plan_title(result), fontsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def _frontier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points no other point beats on both axes, by tokens/s/user."""
    front, best = [], -math.inf
    for x, y in sorted(points, key=lambda p: (-p[0], -p[1])):
        if y > best:
            front.append((x, y))
            best = y
    return sorted(front)
