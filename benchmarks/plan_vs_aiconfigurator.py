"""`dis-serve plan` against `aiconfigurator cli default`, side by side, on a matrix of cases.

Each case is one model, GPU, GPU count, ISL/OSL and SLA (prefill-heavy to decode-heavy, H100
and H200, bf16 and fp8). AIConfigurator runs as the CLI a user would start; `dis-serve plan`
runs in this process (replay included), one after the other on this machine. For both modes
it prints the best tokens/s/GPU of each tool and their ratio, each tool's verdict (agg or
disagg, and by how much), whether they agree, and the plan's replayed SLA attainment.
Writes benchmarks/results/plan_vs_aiconfigurator.json.

    python benchmarks/plan_vs_aiconfigurator.py [--only NAME ...]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "toolkit"))

# AIConfigurator's margin above which both tools must name the same mode.
VERDICT_MARGIN = 0.05

CASES = [
    {"name": "8b-h100-8-short", "model": "llama-3.1-8b",
     "aic_model": "meta-llama/Meta-Llama-3.1-8B",
     "gpu": "h100-sxm", "system": "h100_sxm", "gpus": 8, "isl": 1000, "osl": 200,
     "ttft_ms": 300, "itl_ms": 20},
    {"name": "70b-h100-64-long", "model": "llama-3.1-70b",
     "aic_model": "meta-llama/Meta-Llama-3.1-70B", "gpu": "h100-sxm", "system": "h100_sxm",
     "gpus": 64, "isl": 8000, "osl": 300, "ttft_ms": 3000, "itl_ms": 60},
    {"name": "70b-fp8-h100-48", "model": "llama-3.1-70b",
     "aic_model": "nvidia/Llama-3.1-70B-Instruct-FP8", "gpu": "h100-sxm", "system": "h100_sxm",
     "gpus": 48, "isl": 3000, "osl": 500, "ttft_ms": 1000, "itl_ms": 50, "dtype": "fp8",
     "kv_cache_dtype": "fp8"},
    {"name": "70b-h100-48-seed", "model": "llama-3.1-70b",
     "aic_model": "meta-llama/Meta-Llama-3.1-70B", "gpu": "h100-sxm", "system": "h100_sxm",
     "gpus": 48, "isl": 3000, "osl": 500, "ttft_ms": 1000, "itl_ms": 50},
    {"name": "70b-h100-32-decode", "model": "llama-3.1-70b",
     "aic_model": "meta-llama/Meta-Llama-3.1-70B", "gpu": "h100-sxm", "system": "h100_sxm",
     "gpus": 32, "isl": 500, "osl": 1500, "ttft_ms": 500, "itl_ms": 30},
    {"name": "70b-h200-32-decode", "model": "llama-3.1-70b",
     "aic_model": "meta-llama/Meta-Llama-3.1-70B", "gpu": "h200", "system": "h200_sxm",
     "gpus": 32, "isl": 1000, "osl": 2000, "ttft_ms": 1000, "itl_ms": 40},
    {"name": "8b-h200-16-chat", "model": "llama-3.1-8b",
     "aic_model": "meta-llama/Meta-Llama-3.1-8B", "gpu": "h200", "system": "h200_sxm",
     "gpus": 16, "isl": 256, "osl": 1024, "ttft_ms": 300, "itl_ms": 15},
    {"name": "qwen32b-h100-16-long", "model": "qwen3-32b", "aic_model": "Qwen/Qwen3-32B",
     "gpu": "h100-sxm", "system": "h100_sxm", "gpus": 16, "isl": 4000, "osl": 500,
     "ttft_ms": 1500, "itl_ms": 40},
    {"name": "qwen32b-fp8-h200-32", "model": "qwen3-32b", "aic_model": "Qwen/Qwen3-32B-FP8",
     "gpu": "h200", "system": "h200_sxm", "gpus": 32, "isl": 2000, "osl": 200,
     "ttft_ms": 800, "itl_ms": 30, "dtype": "fp8", "kv_cache_dtype": "fp8"},
]


def _bin(name: str) -> str:
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else (shutil.which(name) or name)


def run_aiconfigurator(case: dict, work: Path) -> dict:
    argv = [_bin("aiconfigurator"), "cli", "default", "--model-path", case["aic_model"],
            "--total-gpus", str(case["gpus"]), "--system", case["system"], "--backend",
            "trtllm", "--isl", str(case["isl"]), "--osl", str(case["osl"]), "--ttft",
            str(case["ttft_ms"]), "--tpot", str(case["itl_ms"]), "--save-dir", str(work)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"aiconfigurator failed ({done.returncode}):\n{done.stderr[-2000:]}")
    best = {}
    for mode in ("agg", "disagg"):
        tables = list(work.rglob(f"{mode}/best_config_topn.csv"))
        rows = list(csv.DictReader(tables[0].open())) if tables else []
        if not rows:
            best[mode] = None
            continue
        top = max(rows, key=lambda r: float(r["tokens/s/gpu"]))
        best[mode] = {"tokens_per_s_per_gpu": float(top["tokens/s/gpu"]),
                      "ttft_ms": float(top["ttft"]), "tpot_ms": float(top["tpot"]),
                      "config": _aic_label(mode, top)}
    return {"wall_s": wall, "best": best}


def _aic_label(mode: str, row: dict) -> str:
    if mode == "agg":
        return f"tp{row.get('tp', '?')} bs{row.get('bs', '?')}"
    return (f"{row['(p)workers']}x prefill tp{row['(p)tp']} bs{row['(p)bs']} + "
            f"{row['(d)workers']}x decode tp{row['(d)tp']} bs{row['(d)bs']}")


def run_dis_serve(case: dict, work: Path) -> dict:
    from dis_serve.plan.request import build_request
    from dis_serve.plan.runner import run_plan

    request = build_request(
        model=case["model"], gpu=case["gpu"], isl=case["isl"], osl=case["osl"],
        budget=case["gpus"], ttft_ms=case["ttft_ms"], itl_ms=case["itl_ms"],
        dtype=case.get("dtype"), kv_cache_dtype=case.get("kv_cache_dtype"))
    started = time.perf_counter()
    outcome = run_plan(request, work)
    wall = time.perf_counter() - started
    best = {"agg": outcome.top_aggregated[0] if outcome.top_aggregated else None,
            "disagg": outcome.top_disaggregated[0] if outcome.top_disaggregated else None}
    replayed = outcome.replay[0] if outcome.replay else None
    return {"wall_s": wall, "outcome": outcome, "best": best, "replay": replayed}


def _verdict(agg: float | None, disagg: float | None) -> tuple[str, float]:
    """The mode with more tokens/s/GPU and its margin over the other."""
    if not agg or not disagg:
        return ("disagg" if disagg else "agg"), float("inf")
    return ("disagg", disagg / agg - 1) if disagg > agg else ("agg", agg / disagg - 1)


def compare(case: dict, aic: dict, ours: dict) -> dict:
    row: dict = {"case": case["name"]}
    for mode in ("agg", "disagg"):
        theirs, mine = aic["best"][mode], ours["best"][mode]
        row[f"{mode}_aic"] = theirs["tokens_per_s_per_gpu"] if theirs else None
        row[f"{mode}_ours"] = mine.tokens_per_s_per_gpu if mine else None
        row[f"{mode}_ratio"] = (row[f"{mode}_ours"] / row[f"{mode}_aic"]
                                if row[f"{mode}_aic"] and row[f"{mode}_ours"] else None)
    row["aic_verdict"], row["aic_margin"] = _verdict(row["agg_aic"], row["disagg_aic"])
    outcome = ours["outcome"]
    row["our_verdict"] = outcome.plan.mode.value
    row["our_margin"] = _verdict(row["agg_ours"], row["disagg_ours"])[1]
    row["verdicts_agree"] = (row["our_verdict"] == row["aic_verdict"]
                             or row["aic_margin"] <= VERDICT_MARGIN)
    rep = ours["replay"]
    row["plan"] = outcome.plan.short_label
    row["replayed_sla_met"] = rep.sla_met_share if rep else None
    row["replay_passed"] = bool(rep and rep.passed)
    row["wall_s_ours"], row["wall_s_aic"] = ours["wall_s"], aic["wall_s"]
    return row


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict]) -> None:
    head = (f"{'case':<22} {'agg ours/AIC':>17} {'ratio':>6} {'disagg ours/AIC':>17} "
            f"{'ratio':>6} {'AIC verdict':>14} {'our verdict':>14} {'agree':>5} "
            f"{'replay SLA':>10} {'s ours/AIC':>11}")
    print(head)
    for r in rows:
        agg = f"{_fmt(r['agg_ours'], '.0f')}/{_fmt(r['agg_aic'], '.0f')}"
        dis = f"{_fmt(r['disagg_ours'], '.0f')}/{_fmt(r['disagg_aic'], '.0f')}"
        print(f"{r['case']:<22} {agg:>17} {_fmt(r['agg_ratio'], '.3f'):>6} {dis:>17} "
              f"{_fmt(r['disagg_ratio'], '.3f'):>6} "
              f"{r['aic_verdict'] + ' +' + format(r['aic_margin'], '.0%'):>14} "
              f"{r['our_verdict'] + ' +' + format(r['our_margin'], '.0%'):>14} "
              f"{'yes' if r['verdicts_agree'] else 'NO':>5} "
              f"{_fmt(r['replayed_sla_met'], '.0%'):>10} "
              f"{r['wall_s_ours']:>5.1f}/{r['wall_s_aic']:<5.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--only", nargs="*", help="Case names to run (default: all).")
    args = parser.parse_args()
    os.environ.setdefault("DYN_LOG", "warn")
    rows = []
    for case in CASES:
        if args.only and case["name"] not in args.only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            aic = run_aiconfigurator(case, Path(tmp) / "aic")
            ours = run_dis_serve(case, Path(tmp) / "plan")
        rows.append(compare(case, aic, ours))
        print(f"done {case['name']}", file=sys.stderr)
    print_table(rows)
    ratios = [r[k] for r in rows for k in ("agg_ratio", "disagg_ratio") if r[k]]
    print(f"ratios within +-5%: {sum(abs(x - 1) <= 0.05 for x in ratios)} of {len(ratios)}; "
          f"verdicts agree: {sum(r['verdicts_agree'] for r in rows)} of {len(rows)}; "
          f"plans that pass their replay: {sum(r['replay_passed'] for r in rows)} of "
          f"{len(rows)}")
    args.out.mkdir(parents=True, exist_ok=True)
    record = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                          "platform": platform.platform()},
              "verdict_margin": VERDICT_MARGIN, "cases": CASES, "rows": rows}
    target = args.out / "plan_vs_aiconfigurator.json"
    target.write_text(json.dumps(record, indent=2, default=str) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
