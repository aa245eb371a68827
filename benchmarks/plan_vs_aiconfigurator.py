"""`dis-serve plan` against `aiconfigurator cli default`, side by side, on the same inputs.

Llama-3.1-70B on 48 H100 SXM, TensorRT-LLM, 3,000 tokens in / 500 out, TTFT 1,000 ms,
TPOT/ITL 50 ms. Both run as the CLI a user would start (imports included), one after the
other on this machine; then a 2,000-request Dynamo replay of the chosen plan is timed.
Prints a table and writes benchmarks/results/plan_vs_aiconfigurator.json.

    python benchmarks/plan_vs_aiconfigurator.py
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
CASE = {"model": "llama-3.1-70b", "aic_model": "meta-llama/Meta-Llama-3.1-70B",
        "gpus": 48, "system": "h100_sxm", "isl": 3000, "osl": 500, "ttft_ms": 1000,
        "itl_ms": 50}
REPLAY_REQUESTS = 2000


def _bin(name: str) -> str:
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else (shutil.which(name) or name)


def run_aiconfigurator(work: Path) -> dict:
    argv = [_bin("aiconfigurator"), "cli", "default", "--model-path", CASE["aic_model"],
            "--total-gpus", str(CASE["gpus"]), "--system", CASE["system"], "--backend",
            "trtllm", "--isl", str(CASE["isl"]), "--osl", str(CASE["osl"]), "--ttft",
            str(CASE["ttft_ms"]), "--tpot", str(CASE["itl_ms"]), "--save-dir", str(work)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"aiconfigurator failed ({done.returncode}):\n{done.stderr[-2000:]}")
    best = {}
    for mode in ("agg", "disagg"):
        table = next(work.rglob(f"{mode}/best_config_topn.csv"))
        rows = list(csv.DictReader(table.open()))
        top = max(rows, key=lambda r: float(r["tokens/s/gpu"]))
        best[mode] = {"tokens_per_s_per_gpu": float(top["tokens/s/gpu"]),
                      "ttft_ms": float(top["ttft"]), "tpot_ms": float(top["tpot"]),
                      "requests_per_s": float(top["request_rate"]) if top.get("request_rate")
                      else None, "config": _aic_label(mode, top)}
    return {"wall_s": wall, "best": best, "argv": argv}


def _aic_label(mode: str, row: dict) -> str:
    if mode == "agg":
        return f"agg tp{row['tp']} bs{row['bs']} x {row.get('replicas', '?')}" if "tp" in row \
            else row.get("parallel", "")
    return (f"{row['(p)workers']}x prefill tp{row['(p)tp']} bs{row['(p)bs']} + "
            f"{row['(d)workers']}x decode tp{row['(d)tp']} bs{row['(d)bs']}")


def run_dis_serve(work: Path) -> dict:
    argv = [_bin("dis-serve"), "plan", "--model", CASE["model"], "--gpu", "h100-sxm",
            "--isl", str(CASE["isl"]), "--osl", str(CASE["osl"]), "--budget", str(CASE["gpus"]),
            "--ttft-ms", str(CASE["ttft_ms"]), "--itl-ms", str(CASE["itl_ms"]),
            "--no-replay", "--out", str(work)]
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False,
                          env=os.environ | {"COLUMNS": "140"})
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dis-serve plan failed ({done.returncode}):\n{done.stderr[-2000:]}")
    plan = json.loads((work / "plan.json").read_text())
    return {"wall_s": wall, "plan": plan, "argv": argv, "stdout": done.stdout}


def time_replay() -> dict:
    sys.path.insert(0, str(REPO / "toolkit"))
    from dis_serve.plan.mocker_profile import profile_tables, write_profile
    from dis_serve.plan.planner import make_plan
    from dis_serve.plan.replay import replay_plan
    from dis_serve.plan.request import build_request

    request = build_request(model=CASE["model"], isl=CASE["isl"], osl=CASE["osl"],
                            budget=CASE["gpus"], ttft_ms=CASE["ttft_ms"],
                            itl_ms=CASE["itl_ms"])
    result = make_plan(request)
    with tempfile.TemporaryDirectory() as tmp:
        profile = write_profile(profile_tables(result.model, result.chosen, result.workload.isl,
                                               result.space.seq_len), Path(tmp) / "p.npz")
        replay = replay_plan(result.model.target, result.chosen, profile, result.workload,
                             ttft_sla_ms=CASE["ttft_ms"], itl_sla_ms=CASE["itl_ms"],
                             requests=REPLAY_REQUESTS)
    return {"requests": replay.requests, "wall_s": replay.wall_s,
            "ttft_mean_ms": replay.ttft_mean_ms, "itl_mean_ms": replay.itl_mean_ms,
            "served_rate": replay.served_rate, "steady": replay.steady}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        aic = run_aiconfigurator(Path(tmp) / "aic")
        ours = run_dis_serve(Path(tmp) / "plan")
    replay = time_replay()
    plan = ours["plan"]
    aic_best = max(aic["best"].values(), key=lambda b: b["tokens_per_s_per_gpu"])
    chosen = plan["plan"]
    ours_agg = plan["top_aggregated"][0] if plan["top_aggregated"] else None
    rows = [
        ("best tokens/s/GPU", f"{chosen['tokens_per_s_per_gpu']:.1f} ({chosen['label']})",
         f"{aic_best['tokens_per_s_per_gpu']:.1f} ({aic_best['config']})"),
        ("best aggregated tokens/s/GPU",
         f"{ours_agg['tokens_per_s_per_gpu']:.1f}" if ours_agg else "-",
         f"{aic['best']['agg']['tokens_per_s_per_gpu']:.1f}"),
        ("TTFT of the plan", f"p90 {chosen['ttft_p90_ms']:.0f} ms (mean "
                             f"{chosen['ttft_mean_ms']:.0f})",
         f"{aic_best['ttft_ms']:.0f} ms (its estimate)"),
        ("wall time (CLI, imports included)", f"{ours['wall_s']:.1f} s", f"{aic['wall_s']:.1f} s"),
    ]
    ratio_tput = chosen["tokens_per_s_per_gpu"] / aic_best["tokens_per_s_per_gpu"]
    ratio_wall = ours["wall_s"] / aic["wall_s"]
    width = max(len(r[0]) for r in rows)
    print(f"Llama-3.1-70B, 48 x H100 SXM, trtllm, ISL {CASE['isl']} / OSL {CASE['osl']}, "
          f"TTFT {CASE['ttft_ms']} ms, ITL {CASE['itl_ms']} ms")
    print(f"{'':{width}}  {'dis-serve plan':<60}  aiconfigurator cli default")
    for name, a, b in rows:
        print(f"{name:{width}}  {a:<60}  {b}")
    print(f"tokens/s/GPU, dis-serve / AIConfigurator: {ratio_tput:.3f}")
    print(f"planning wall time, dis-serve / AIConfigurator: {ratio_wall:.2f}")
    print(f"replay of the plan: {replay['requests']} requests in {replay['wall_s']:.2f} s "
          f"(mean TTFT {replay['ttft_mean_ms']:.0f} ms, ITL {replay['itl_mean_ms']:.1f} ms, "
          f"{replay['served_rate']:.2f} req/s"
          + ("" if replay["steady"] else "; too short for a steady decode batch, so timing "
             "only: `dis-serve plan` replays enough requests for one") + ")")
    args.out.mkdir(parents=True, exist_ok=True)
    record = {
        "case": CASE, "machine": {"python": platform.python_version(),
                                  "cpus": os.cpu_count(), "platform": platform.platform()},
        "dis_serve": {"wall_s": round(ours["wall_s"], 3), "plan": chosen,
                      "best_aggregated": ours_agg,
                      "performance_model": plan["performance_model"]},
        "aiconfigurator": {"wall_s": round(aic["wall_s"], 3), "best": aic["best"]},
        "ratios": {"tokens_per_s_per_gpu": round(ratio_tput, 4),
                   "wall_time": round(ratio_wall, 4)},
        "replay_2000": replay,
    }
    target = args.out / "plan_vs_aiconfigurator.json"
    target.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {target}")


if __name__ == "__main__":
    main()
