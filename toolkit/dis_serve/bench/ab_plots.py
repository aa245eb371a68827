"""The PNGs of a comparison: latency CDFs per arm, goodput per GPU against load, and the
prefix-cache hit rate per arm, each with the spread over repetitions."""

from __future__ import annotations

from pathlib import Path

from .ab import ArmRuns, spread
from .metrics import METRICS_BY_KEY
from .plots import load_axis, pyplot, save_figure
from .requests import RECORDS_FILE, read_records
from .sweep import artifact_dir

CDF_FILE = "latency-cdf.png"
GOODPUT_FILE = "goodput-vs-load.png"
HIT_RATE_FILE = "hit-rate.png"


def write_ab_plots(arms: list[ArmRuns], out_dir: Path) -> list[Path]:
    return [write_cdf(arms, out_dir), write_goodput(arms, out_dir),
            write_hit_rate(arms, out_dir)]


def write_cdf(arms: list[ArmRuns], out_dir: Path) -> Path:
    """TTFT and ITL CDFs at the heaviest load point, all repetitions pooled."""
    plt = pyplot()
    scenario = arms[0].runs[0].scenario
    point = max(scenario.points(), key=lambda p: p.value)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for arm in arms:
        records = []
        for run_dir in arm.run_dirs:
            path = artifact_dir(Path(run_dir), point) / RECORDS_FILE
            if path.is_file():
                records += read_records(path)
        for ax, attr in zip(axes, ("ttft_ms", "itl_ms"), strict=True):
            values = sorted(v for r in records if (v := getattr(r, attr)) is not None)
            if values:
                ax.step(values, [(i + 1) / len(values) for i in range(len(values))],
                        where="post", label=f"{arm.label} ({len(values)} requests)")
    for ax, title, sla in zip(axes, ("TTFT", "ITL"),
                              (scenario.sla.ttft_ms, scenario.sla.itl_ms), strict=True):
        ax.axvline(sla, color="red", linestyle="--", linewidth=1, label="SLA")
        ax.set_title(f"{title} CDF at {point.label}")
        ax.set_xlabel("ms")
        ax.set_ylabel("fraction of requests")
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    return save_figure(plt, fig, out_dir / CDF_FILE)


def write_goodput(arms: list[ArmRuns], out_dir: Path) -> Path:
    """Goodput per GPU against load; bars span the repetitions' range."""
    plt = pyplot()
    scenario = arms[0].runs[0].scenario
    points = sorted(scenario.points(), key=lambda p: p.value)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    get = METRICS_BY_KEY["goodput_per_gpu"].get
    for arm in arms:
        spreads = [spread([get(p) for p in arm.at(point)]) for point in points]
        xs = [pt.value for pt, s in zip(points, spreads, strict=True) if s]
        found = [s for s in spreads if s]
        ax.errorbar(xs, [s.mean for s in found],
                    yerr=[[s.mean - s.low for s in found], [s.high - s.mean for s in found]],
                    marker="o", capsize=4, label=arm.label)
    load_axis(ax, [p.value for p in points], scenario.load_kind.label)
    ax.set_ylabel("goodput per GPU (req/s/GPU meeting the SLA)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{scenario.name}: goodput per GPU against load", fontsize=10)
    return save_figure(plt, fig, out_dir / GOODPUT_FILE)


def write_hit_rate(arms: list[ArmRuns], out_dir: Path) -> Path:
    """Prefix-cache hit rate per arm and load point; bars span the repetitions."""
    plt = pyplot()
    points = arms[0].runs[0].scenario.points()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / len(arms)
    get = METRICS_BY_KEY["prefix_cache_hit_pct"].get
    for index, arm in enumerate(arms):
        spreads = [spread([get(p) for p in arm.at(point)]) for point in points]
        xs = [i + index * width for i, s in enumerate(spreads) if s]
        found = [s for s in spreads if s]
        ax.bar(xs, [s.mean for s in found], width=width, label=arm.label,
               yerr=[[s.mean - s.low for s in found], [s.high - s.mean for s in found]],
               capsize=4)
    ax.set_xticks([i + width * (len(arms) - 1) / 2 for i in range(len(points))],
                  [p.label for p in points])
    ax.set_ylabel("prompt tokens served from the prefix cache (%)")
    ax.set_ylim(0, 100)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Prefix-cache hit rate per arm (workers' cached-token counts)", fontsize=10)
    return save_figure(plt, fig, out_dir / HIT_RATE_FILE)
