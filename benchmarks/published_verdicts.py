"""Published aggregated-against-disaggregated comparisons beside what `dis-serve plan` says
of the nearest setup it can plan.

The comparisons are data (`benchmarks/published/agg_vs_disagg_verdicts.csv`): each with its
source, engine, whether it was measured or simulated, the setup, the published verdict and,
where one is published, its margin (disaggregated over aggregated throughput per GPU, minus
one). Each one the planner can plan (a dense model it knows; where the source leaves the SLA
or GPU unsaid the row says what was assumed) is planned as `dis-serve plan` would: the
best deployment of each mode within the GPUs, verified in Dynamo's replay, the verdict with
its margin and the model's measured error around it. Printed: both verdicts, the margins,
whether the directions agree (a published "aggregated" against a plan where disaggregation
does not pay, and so on), and for a published margin, our disaggregated-over-aggregated
ratio over the published one. Writes benchmarks/results/published_verdicts.json; with
`--write-errors`, the comparisons with a published margin as the planner's measured cases of
disaggregated serving (`plan.model_error`: what the verdicts' model error rests on).

    python benchmarks/published_verdicts.py [--no-replay] [--only ID ...] [--write-errors]
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "toolkit"))
sys.path.insert(0, str(REPO / "benchmarks"))

CASES_FILE = REPO / "benchmarks" / "published" / "agg_vs_disagg_verdicts.csv"
RESULTS = REPO / "benchmarks" / "results" / "published_verdicts.json"


def load_cases(only: list[str] | None) -> list[dict]:
    with CASES_FILE.open(newline="") as rows:
        return [c for c in csv.DictReader(rows) if not only or c["id"] in only]


def plan_case(case: dict, replay: bool):
    from dis_serve.plan.pipeline import run_plan
    from dis_serve.plan.request import build_request

    request = build_request(
        model=case["plan_model"], gpu=case["plan_gpu"], isl=int(case["isl"]),
        osl=int(case["osl"]), budget=int(case["plan_budget"]), dtype=case["plan_dtype"],
        kv_cache_dtype=case["plan_kv_dtype"], arrival=case["plan_arrival"],
        ttft_ms=float(case["plan_ttft_ms"]), itl_ms=float(case["plan_itl_ms"]), replay=replay)
    with tempfile.TemporaryDirectory(prefix="published-verdicts-") as work:
        return run_plan(request, Path(work))


def compare(case: dict, replay: bool) -> dict:
    out = {"id": case["id"], "source": case["source"], "engine": case["engine"],
           "kind": case["kind"], "setup": case["setup"],
           "published_verdict": case["published_verdict"],
           "published_margin": float(case["published_margin"]) if case["published_margin"]
           else None, "published_note": case["published_note"], "plan_note": case["plan_note"]}
    if not case["plan_model"]:
        return out | {"planned": False}
    started = time.perf_counter()
    outcome = plan_case(case, replay)
    verdict = outcome.verdict
    agg = outcome.top_aggregated[0] if outcome.top_aggregated else None
    disagg = outcome.top_disaggregated[0] if outcome.top_disaggregated else None
    ours = "disagg" if verdict.disaggregation_pays else "agg"
    out |= {"planned": True, "wall_s": time.perf_counter() - started,
            "plan": (f"{case['plan_model']}, {case['plan_budget']} x {case['plan_gpu']}, "
                     f"{case['isl']}/{case['osl']}, {case['plan_dtype']}, TTFT "
                     f"{case['plan_ttft_ms']} ms, ITL {case['plan_itl_ms']} ms, "
                     f"{case['plan_arrival']}"),
            "agg": agg.short_label if agg else None,
            "disagg": disagg.short_label if disagg else None,
            "our_verdict": ours, "margin": verdict.margin, "model_error": verdict.model_error,
            "too_close_to_call": verdict.too_close_to_call,
            "agrees": (None if case["published_verdict"] not in ("agg", "disagg")
                       else case["published_verdict"] == ours),
            "disagg_itl_ms": disagg.itl_mean_ms if disagg else None,
            "disagg_decode_tp": next((p.tensor_parallel for p in disagg.pools
                                      if p.role.value == "decode"), None) if disagg else None}
    if out["published_margin"] is not None and verdict.margin is not None:
        out["ratio_over_published"] = (1 + verdict.margin) / (1 + out["published_margin"])
    return out


def _margin(value: float | None) -> str:
    return "-" if value is None else f"{value:+.0%}"


def print_table(rows: list[dict]) -> None:
    print("| comparison | engine, kind | setup | published | dis-serve's nearest plan | "
          "dis-serve | margin +- model error | too close | agrees | ours / published |")
    print("|---|---|---|---|---|---|---|---|---|---:|")
    for r in rows:
        published = r["published_verdict"] + (
            f" {_margin(r['published_margin'])}" if r["published_margin"] is not None else "")
        if not r["planned"]:
            print(f"| {r['id']} | {r['engine']}, {r['kind']} | {r['setup']} | {published} | "
                  f"{r['plan_note']} | - | - | - | - | - |")
            continue
        error = "" if r["model_error"] is None else f" +- {r['model_error']:.0%}"
        agrees = {None: "n/a", True: "yes", False: "no"}[r["agrees"]]
        ratio = f"{r['ratio_over_published']:.3f}" if "ratio_over_published" in r else "-"
        print(f"| {r['id']} | {r['engine']}, {r['kind']} | {r['setup']} | {published} | "
              f"{r['plan']} | {r['our_verdict']} ({r['disagg']} against {r['agg']}) | "
              f"{_margin(r['margin'])}{error} | {'yes' if r['too_close_to_call'] else 'no'} | "
              f"{agrees} | {ratio} |")
    planned = [r for r in rows if r["planned"] and r["agrees"] is not None]
    print(f"- directions: {sum(r['agrees'] for r in planned)} of {len(planned)} planned "
          f"comparisons agree; {sum(r['too_close_to_call'] for r in planned)} too close to "
          "call")


def measured_error_rows(rows: list[dict], cases: dict[str, dict]) -> list[dict]:
    """Each comparison with a published margin as a measured case of disaggregated serving:
    our disaggregated-over-aggregated ratio over the published one, at our disaggregated
    plan's point."""
    out = []
    for r in rows:
        if "ratio_over_published" not in r:
            continue
        case = cases[r["id"]]
        out.append({"mode": "disagg", "case": r["id"], "model": case["plan_model"],
                    "gpu": case["plan_gpu"], "dtype": case["plan_dtype"],
                    "tp": r["disagg_decode_tp"] or "", "isl": case["isl"], "osl": case["osl"],
                    "itl_ms": f"{r['disagg_itl_ms']:.2f}", "arrival": case["plan_arrival"],
                    "engine": "vllm" if case["engine"].lower().startswith("vllm") else
                    case["engine"], "ratio": f"{r['ratio_over_published']:.4f}",
                    "source": case["source"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="comparison ids from the data file")
    parser.add_argument("--no-replay", action="store_true", help="skip the verification")
    parser.add_argument("--write-errors", action="store_true",
                        help="rewrite this benchmark's rows of the planner's measured cases "
                             "(benchmarks/published/measured_error.csv)")
    args = parser.parse_args()
    cases = load_cases(args.only)
    rows = []
    for case in cases:
        rows.append(compare(case, replay=not args.no_replay))
        print(f"{case['id']}: {rows[-1].get('our_verdict', 'not planned')}", file=sys.stderr,
              flush=True)
    print_table(rows)
    if args.write_errors:
        from measured_errors import replace_rows

        written = replace_rows("published_verdicts",
                               measured_error_rows(rows, {c["id"]: c for c in cases}))
        print(f"\nwrote the measured cases to {written}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
