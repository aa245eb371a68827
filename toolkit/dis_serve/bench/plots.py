"""The report's PNGs: the Pareto curve (tokens/s/GPU against tokens/s/user) and latency
against load. matplotlib runs headless (Agg) and is imported only when a plot is drawn."""

from __future__ import annotations

from pathlib import Path

from .metrics import BenchResult, PointResult

PARETO_FILE = "pareto.png"
LATENCY_FILE = "latency.png"
COMPARE_FILE = "compare.png"


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve(result: BenchResult) -> tuple[list[float], list[float], list[str]]:
    # The sweep traces the curve from low load (fast per user) to high load (dense per GPU).
    points = sorted((p for p in result.points if p.tokens_per_s_per_user is not None),
                    key=lambda p: p.point.value)
    return ([p.tokens_per_s_per_user or 0.0 for p in points],
            [p.tokens_per_s_per_gpu for p in points],
            [p.point.display_value for p in points])


def _pareto_axes(ax, result: BenchResult, label: str, color: str | None = None) -> None:
    users, gpus, loads = _curve(result)
    line, = ax.plot(users, gpus, marker="o", label=label, color=color)
    for x, y, text in zip(users, gpus, loads, strict=True):
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8,
                    color=line.get_color())


def _label_pareto(ax, *results: BenchResult) -> None:
    ax.set_xlabel("tokens/s/user (decode speed one request sees)")
    ax.set_ylabel(f"tokens/s/GPU ({results[0].gpu_type})")
    ax.grid(True, alpha=0.3)
    # From the origin, with room for the labels: the curve's shape is the point.
    xs = [x for r in results for x in _curve(r)[0]] or [1.0]
    ys = [y for r in results for y in _curve(r)[1]] or [1.0]
    ax.set_xlim(0, max(xs) * 1.15 or 1.0)
    ax.set_ylim(0, max(ys) * 1.15 or 1.0)


def load_axis(ax, loads: list[float], label: str) -> None:
    ax.set_xlabel(label)
    if loads and min(loads) > 0 and max(loads) / min(loads) >= 8:
        # Sweeps double the load from step to step; a log axis spaces them evenly.
        ax.set_xscale("log", base=2)
        ax.set_xticks(loads, [f"{v:g}" for v in loads])


def save_figure(plt, fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_pareto(result: BenchResult, out_dir: Path) -> Path:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    _pareto_axes(ax, result, f"{result.topology} ({result.gpus} GPUs)")
    _label_pareto(ax, result)
    ax.set_title(f"{result.scenario.name} on {result.topology}: throughput vs interactivity\n"
                 f"(labels: {result.scenario.load_kind.label})", fontsize=10)
    ax.legend()
    return save_figure(plt, fig, out_dir / PARETO_FILE)


def _series(points: list[PointResult], attr: str, stat: str) -> list[float]:
    return [getattr(getattr(p.aiperf, attr), stat) for p in points]


def write_latency(result: BenchResult, out_dir: Path) -> Path:
    plt = pyplot()
    points = sorted(result.points, key=lambda p: p.point.value)
    loads = [p.point.value for p in points]
    panels = [(attr, title) for attr, title in
              (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "End-to-end"))
              if all(getattr(p.aiperf, attr) is not None for p in points)]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4), squeeze=False)
    for ax, (attr, title) in zip(axes[0], panels, strict=True):
        for stat in ("p50", "p90", "p99"):
            ax.plot(loads, _series(points, attr, stat), marker="o", label=stat)
        sla = {"ttft_ms": result.scenario.sla.ttft_ms,
               "itl_ms": result.scenario.sla.itl_ms}.get(attr)
        if sla is not None:
            ax.axhline(sla, color="red", linestyle="--", linewidth=1, label="SLA")
        ax.set_title(f"{title} latency")
        load_axis(ax, loads, result.scenario.load_kind.label)
        ax.set_ylabel("ms")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{result.scenario.name} on {result.topology}: latency against load",
                 fontsize=10)
    return save_figure(plt, fig, out_dir / LATENCY_FILE)


def write_compare(results: list[tuple[str, BenchResult]], out_dir: Path) -> Path:
    """Each arm's Pareto curve (its first repetition) on one chart."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for label, result in results:
        _pareto_axes(ax, result, f"{label} ({result.gpus} GPUs)")
    _label_pareto(ax, *(r for _, r in results))
    first = results[0][1]
    ax.set_title(f"{first.scenario.name}: " + " vs ".join(label for label, _ in results)
                 + f"\n(labels: {first.scenario.load_kind.label})", fontsize=10)
    ax.legend()
    return save_figure(plt, fig, out_dir / COMPARE_FILE)
