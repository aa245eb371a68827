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
# The target band for ours/AIConfigurator's best tokens/s/GPU; a ratio outside it is explained.
RATIO_BAND = 0.05
# AIConfigurator's autoscale TTFT correction (aiconfigurator.sdk.picking): a disaggregated
# prefill worker qualifies only if 1.8 x its pass latency fits the TTFT SLA.
AIC_TTFT_FACTOR = 1.8

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
     "ttft_ms": 800, "itl_ms": 30, "dtype": "fp8", "kv_cache_dtype": "fp8",
     # The catalog publishes no FP8 Qwen3-32B: planned as a user's Model Optimizer export.
     "checkpoint": "qwen3-32b-modelopt-fp8"},
    # Held out: added after the budget ranking prefers fewer GPUs among goodputs within one
    # back-off step, chosen before they were run, to show the change generalises.
    {"name": "70b-h200-24-mid", "model": "llama-3.1-70b",
     "aic_model": "meta-llama/Meta-Llama-3.1-70B", "gpu": "h200", "system": "h200_sxm",
     "gpus": 24, "isl": 2000, "osl": 800, "ttft_ms": 1200, "itl_ms": 35},
    {"name": "qwen32b-h100-24-decode", "model": "qwen3-32b", "aic_model": "Qwen/Qwen3-32B",
     "gpu": "h100-sxm", "system": "h100_sxm", "gpus": 24, "isl": 1000, "osl": 1500,
     "ttft_ms": 800, "itl_ms": 25},
    {"name": "8b-h100-16-long", "model": "llama-3.1-8b",
     "aic_model": "meta-llama/Meta-Llama-3.1-8B", "gpu": "h100-sxm", "system": "h100_sxm",
     "gpus": 16, "isl": 6000, "osl": 400, "ttft_ms": 1500, "itl_ms": 25},
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
                      "config": _aic_label(mode, top),
                      "decode_bs": int(float(top["(d)bs"])) if mode == "disagg" else None}
    return {"wall_s": wall, "best": best}


def _aic_label(mode: str, row: dict) -> str:
    if mode == "agg":
        return f"tp{row.get('tp', '?')} bs{row.get('bs', '?')}"
    return (f"{row['(p)workers']}x prefill tp{row['(p)tp']} bs{row['(p)bs']} + "
            f"{row['(d)workers']}x decode tp{row['(d)tp']} bs{row['(d)bs']}")


def run_dis_serve(case: dict, work: Path) -> dict:
    from dis_serve.plan.pipeline import run_plan
    from dis_serve.plan.request import build_request

    request = build_request(
        model=case["model"], gpu=case["gpu"], isl=case["isl"], osl=case["osl"],
        budget=case["gpus"], ttft_ms=case["ttft_ms"], itl_ms=case["itl_ms"],
        dtype=case.get("dtype"), kv_cache_dtype=case.get("kv_cache_dtype"),
        checkpoint=case.get("checkpoint"))
    started = time.perf_counter()
    outcome = run_plan(request, work)
    wall = time.perf_counter() - started
    best = {"agg": outcome.top_aggregated[0] if outcome.top_aggregated else None,
            "disagg": outcome.top_disaggregated[0] if outcome.top_disaggregated else None}
    replayed = outcome.replay[0] if outcome.replay else None
    return {"wall_s": wall, "outcome": outcome, "best": best, "replay": replayed,
            "request": request}


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
    # The plan's own verdict: its margin (disaggregated against aggregated) and the error the
    # model's measured cases leave around it.
    row["our_signed_margin"] = outcome.verdict.margin
    row["our_model_error"] = outcome.verdict.model_error
    row["too_close_to_call"] = outcome.verdict.too_close_to_call
    rep = ours["replay"]
    row["plan"] = outcome.plan.short_label
    row["replayed_sla_met"] = rep.sla_met_share if rep else None
    row["replay_passed"] = bool(rep and rep.passed)
    row["wall_s_ours"], row["wall_s_aic"] = ours["wall_s"], aic["wall_s"]
    row["why"] = {mode: explain(mode, row, aic, ours) for mode in ("agg", "disagg")
                  if row[f"{mode}_ratio"] and abs(row[f"{mode}_ratio"] - 1) > RATIO_BAND}
    return row


def explain(mode: str, row: dict, aic: dict, ours: dict) -> str:
    """Why a ratio lands outside the band, from this run's own evidence: what the replay
    said about the deployment ranked first on the model, and, for disaggregated serving,
    whether AIConfigurator's TTFT factor would admit our prefill worker."""
    outcome, theirs = ours["outcome"], row[f"{mode}_aic"]
    steps = [s for s in outcome.verification if s.mode.value == mode]
    lines = []
    if steps and not steps[0].passed:
        first, held = steps[0], next((s for s in steps if s.passed), None)
        lines.append(
            f"ranked first on the model: {first.deployment} at {first.requests_per_s:.2f} "
            f"req/s, {first.tokens_per_s_per_gpu:.0f} tokens/s/GPU "
            f"({first.tokens_per_s_per_gpu / theirs:.3f} of AIC); the replay met the SLA for "
            f"{first.sla_met_share:.0%} there" + ("" if held is None else
            f"; it held at {held.requests_per_s / first.requests_per_s:.0%} of that rate "
            f"({held.sla_met_share:.0%} met)"))
        if mode == "agg":
            lines.append("AIC's TRT-LLM estimate charges decoding requests for all but 3 "
                         "mixed prefill/decode steps of a batch cycle (its empirical "
                         "pipeline-drain credit); the mocker charges every step")
    elif steps:
        lines.append(f"the model's first-ranked deployment ({steps[0].deployment}) passed "
                     "its replay: the gap lies between the two tools' models, not in the "
                     "verification")
    mine = ours["best"][mode]
    if mode == "disagg" and mine is not None:
        lines += _prefill_against_aic_factor(mine, ours["request"], aic["best"]["disagg"])
        lines += _decode_cap_against_aic(mine, aic["best"]["disagg"])
    ranked = outcome.top_disaggregated if mode == "disagg" else outcome.top_aggregated
    leaner = max(ranked, key=lambda d: d.tokens_per_s_per_gpu, default=None)
    if mine is not None and leaner is not None and leaner.gpus < mine.gpus and (
            leaner.tokens_per_s_per_gpu > mine.tokens_per_s_per_gpu * (1 + RATIO_BAND / 5)):
        lines.append(
            f"the plan ranks by requests/s within the budget: {mine.short_label} uses "
            f"{mine.gpus} GPUs for {mine.requests_per_s:.2f} req/s; the most tokens/s/GPU "
            f"ranked is {leaner.short_label} on {leaner.gpus} GPUs, "
            f"{leaner.tokens_per_s_per_gpu:.0f} ({leaner.tokens_per_s_per_gpu / theirs:.3f} "
            f"of AIC) for {leaner.requests_per_s:.2f} req/s (predicted, not replayed)")
    return "; ".join(lines)


def _decode_cap_against_aic(mine, theirs: dict | None) -> list[str]:
    from dis_serve.topology import PoolRole

    decode = next(p for p in mine.pools if p.role is PoolRole.DECODE)
    if not theirs or not decode.max_batch_size or decode.max_batch_size <= theirs["decode_bs"]:
        return []
    return [f"our decode batch cap {decode.max_batch_size} against AIC's batch "
            f"{theirs['decode_bs']}: AIC sizes a decode worker by the TPOT of a full static "
            "batch, derated by 0.92; ours by the batch Poisson load settles at below the cap "
            "(Little's law), p90 ITL checked in the replay"]


def _prefill_against_aic_factor(mine, request, theirs: dict | None) -> list[str]:
    from dis_serve.plan.model_choice import choose_perf_model
    from dis_serve.topology import PoolRole

    prefill = next(p for p in mine.pools if p.role is PoolRole.PREFILL)
    batch = prefill.max_batch_size or 1
    pass_ms = choose_perf_model(request.target()).prefill_ms(
        prefill.tensor_parallel, batch, request.isl)
    verdict = ("AIC's factor would reject this prefill worker" if
               pass_ms * AIC_TTFT_FACTOR > request.ttft_ms else
               "AIC's factor admits this prefill worker")
    return [f"our prefill worker TP{prefill.tensor_parallel} batch {batch}: pass "
            f"{pass_ms:.0f} ms, x{AIC_TTFT_FACTOR} = {pass_ms * AIC_TTFT_FACTOR:.0f} ms against "
            f"TTFT {request.ttft_ms:g} ms ({verdict}; AIC's best: "
            f"{theirs['config'] if theirs else '-'})"]


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def print_table(rows: list[dict]) -> None:
    head = (f"{'case':<22} {'agg ours/AIC':>17} {'ratio':>6} {'disagg ours/AIC':>17} "
            f"{'ratio':>6} {'AIC verdict':>14} {'our verdict':>14} {'agree':>5} "
            f"{'our margin +- error':>20} {'close':>5} {'replay SLA':>10} {'s ours/AIC':>11}")
    print(head)
    for r in rows:
        agg = f"{_fmt(r['agg_ours'], '.0f')}/{_fmt(r['agg_aic'], '.0f')}"
        dis = f"{_fmt(r['disagg_ours'], '.0f')}/{_fmt(r['disagg_aic'], '.0f')}"
        weighed = f"{_fmt(r['our_signed_margin'], '+.0%')} +- {_fmt(r['our_model_error'], '.0%')}"
        print(f"{r['case']:<22} {agg:>17} {_fmt(r['agg_ratio'], '.3f'):>6} {dis:>17} "
              f"{_fmt(r['disagg_ratio'], '.3f'):>6} "
              f"{r['aic_verdict'] + ' +' + format(r['aic_margin'], '.0%'):>14} "
              f"{r['our_verdict'] + ' +' + format(r['our_margin'], '.0%'):>14} "
              f"{'yes' if r['verdicts_agree'] else 'NO':>5} "
              f"{weighed:>20} "
              f"{'yes' if r['too_close_to_call'] else 'no':>5} "
              f"{_fmt(r['replayed_sla_met'], '.0%'):>10} "
              f"{r['wall_s_ours']:>5.1f}/{r['wall_s_aic']:<5.1f}")
    for r in rows:
        for mode, why in r["why"].items():
            print(f"  {r['case']} {mode} {r[f'{mode}_ratio']:.3f}: {why}")


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
        print(f"done {case['name']}", file=sys.stderr, flush=True)
    print_table(rows)
    ratios = [r[k] for r in rows for k in ("agg_ratio", "disagg_ratio") if r[k]]
    print(f"ratios within +-5%: {sum(abs(x - 1) <= RATIO_BAND for x in ratios)} of {len(ratios)}; "
          f"verdicts agree: {sum(r['verdicts_agree'] for r in rows)} of {len(rows)}; "
          f"ours too close to call: {sum(r['too_close_to_call'] for r in rows)} of {len(rows)}, "
          f"{sum(r['too_close_to_call'] for r in rows if not r['verdicts_agree'])} of the "
          f"{sum(not r['verdicts_agree'] for r in rows)} that disagree; "
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
