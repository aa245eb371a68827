"""`bench` on a graph `plan --emit --mock` wrote: the report sets the plan's prediction, its
replay and AIPerf's measurement side by side, each row read from its own source. `compare`
and `chaos` of that graph land in the ledger too (their measured runs end in the same
after-bench hook)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from dis_serve.bench.metrics import BenchResult
from dis_serve.plan.vs_measured import closest_point
from relocate import relocate, relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
# Plan-bench ports are 31700-31799 (worker system ports must stay below 32768).
PORT_BASE = 31700
# Short requests at 2/s: the plan is one aggregated TP1 worker, which 2 cores run easily.
PLAN = ("plan", "--model", "llama-3.1-8b", "--isl", "128", "--osl", "32", "--rate", "2",
        "--ttft-ms", "500", "--itl-ms", "50")


def _cli(*args, ledger: Path, timeout: float = 180,
         home: Path | None = None) -> subprocess.CompletedProcess[str]:
    where = {} if home is None else {"DIS_SERVE_HOME": str(home)}
    return subprocess.run([DIS_SERVE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False,
                          env=os.environ | {"COLUMNS": "140", "DIS_SERVE_LEDGER": str(ledger)}
                          | where)


def _row(section: str, name: str) -> list[float]:
    line = next(line for line in section.splitlines() if line.startswith(f"| {name}"))
    return [float(cell.replace(",", "")) for cell in line.strip("|").split("|")[1:]]


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    """The graph `plan --emit --mock` wrote for PLAN, replayed, with its plan directory
    (plan/plan.json) beside it; one plan for the module, each test moving it to its own
    ports. Planned with an empty ledger: no earlier measurement corrects it."""
    work = tmp_path_factory.mktemp("planned")
    emitted = work / "planned.yaml"
    done = _cli(*PLAN, "--out", work / "plan", "--emit", emitted, "--mock",
                ledger=work / "empty-ledger.jsonl")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    return emitted


def _moved(emitted: Path, folder: Path, name: str, base: int) -> Path:
    # Only the ports move: mocker.profile_data still leads bench to the plan beside it.
    graph = folder / f"{name}.yaml"
    graph.write_text(yaml.safe_dump(relocate(yaml.safe_load(emitted.read_text()), name, base),
                                    sort_keys=False))
    return graph


def test_bench_of_an_emitted_graph_tables_plan_replay_and_measurement_and_ledgers_them(
        emitted, tmp_path):
    ledger = tmp_path / "ledger.jsonl"
    graph = _moved(emitted, tmp_path, "planned-bench", PORT_BASE)
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "short", "input_tokens": {"mean": 128}, "output_tokens": {"mean": 32},
        "requests": 8, "concurrency": [1], "sla": {"ttft_ms": 500, "itl_ms": 50}}))
    benched = _cli("bench", graph, "--scenario", scenario, "--out", tmp_path / "bench",
                   ledger=ledger)
    assert benched.returncode == 0, benched.stdout[-3000:] + benched.stderr[-3000:]

    section = (tmp_path / "bench" / "report.md").read_text().split(
        "## Plan vs measurement", 1)[1].split("\n## ", 1)[0]
    outcome = json.loads((emitted.parent / "plan" / "plan.json").read_text())
    plan = outcome["plan"]
    replay = next(r for r in outcome["replay"] if r["deployment"] == "plan")
    result = BenchResult.model_validate_json((tmp_path / "bench" / "results.json").read_text())
    point = closest_point(result, plan["requests_per_s"])
    assert point is not None
    measured_name = f"measured ({point.point.label})"
    header = next(line for line in section.splitlines() if "TTFT mean" in line)
    assert re.findall(r"TTFT mean|TTFT p90|ITL mean|ITL p90|req/s|tokens/s", header) == [
        "TTFT mean", "TTFT p90", "ITL mean", "ITL p90", "req/s", "tokens/s"]
    sources = {
        "predicted (plan)": [plan["ttft_mean_ms"], plan["ttft_p90_ms"], plan["itl_mean_ms"],
                             plan["itl_p90_ms"], plan["requests_per_s"]],
        "replayed (Dynamo replay)": [replay["ttft_mean_ms"], replay["ttft_p90_ms"],
                                     replay["itl_mean_ms"], replay["itl_p90_ms"],
                                     replay["requests_per_s"]],
        measured_name: [point.aiperf.ttft_ms.avg, point.aiperf.ttft_ms.p90,
                        point.aiperf.itl_ms.avg, point.aiperf.itl_ms.p90,
                        point.aiperf.request_throughput],
    }
    for name, expected in sources.items():
        # The table rounds TTFT to 1 ms, ITL and req/s to 0.01.
        assert _row(section, name)[:5] == pytest.approx(expected, abs=0.51), name
    assert point.aiperf.completed_requests == 8 and point.aiperf.request_throughput > 0

    # The bench went into the ledger, and the next plan for the same model and GPU reads it.
    (entry,) = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert entry["nearest_to_plan"] and entry["fingerprint"] == point.fingerprint
    assert entry["measured"]["itl_mean_ms"] == pytest.approx(point.aiperf.itl_ms.avg)
    assert entry["replayed"]["requests_per_s"] == pytest.approx(replay["requests_per_s"])
    assert entry["verdict"] == outcome["verdict"]  # the margin and error the bench checks
    replanned = _cli(*PLAN, "--out", tmp_path / "again", "--no-replay", ledger=ledger)
    ratio = point.aiperf.itl_ms.avg / plan["itl_mean_ms"]
    assert f"ITL x{ratio:.2f}" in replanned.stdout, replanned.stdout[-2000:]


# A short, steady load: one point, every request streamed.
SHORT = {"name": "short", "input_tokens": {"mean": 128}, "output_tokens": {"mean": 32},
         "requests": 8, "sla": {"ttft_ms": 500, "itl_ms": 50}}


@pytest.fixture(scope="module")
def planned(emitted, tmp_path_factory) -> Path:
    """The emitted graph on the ports of the ledger-bookkeeping tests."""
    return _moved(emitted, tmp_path_factory.mktemp("planned-runs"), "planned-runs",
                  PORT_BASE + 40)


def _entries(ledger: Path) -> list[dict]:
    return [json.loads(line) for line in ledger.read_text().splitlines()]


def test_compare_ledgers_the_run_of_the_planned_arm_and_nothing_of_the_other(planned,
                                                                              tmp_path):
    demo = tmp_path / "demo-here.yaml"
    demo.write_text(yaml.safe_dump(relocated_demo("unplanned-runs", PORT_BASE + 40)))
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT | {"concurrency": [1]}))
    ledger = tmp_path / "ledger.jsonl"
    compared = _cli("compare", planned, demo, "--scenario", scenario, "--out",
                    tmp_path / "compare", ledger=ledger, home=tmp_path, timeout=300)
    assert compared.returncode == 0, compared.stdout[-3000:] + compared.stderr[-3000:]
    result = BenchResult.model_validate_json(
        (tmp_path / "compare" / "planned-runs" / "results.json").read_text())
    assert [(e["topology_file"], e["fingerprint"]) for e in _entries(ledger)] == [
        (str(planned), p.fingerprint) for p in result.points]
    assert f"planned graph: {len(result.points)} point(s) added to the ledger {ledger}" in (
        compared.stdout)


def test_chaos_ledgers_its_fault_free_run_and_not_the_run_with_faults(planned, tmp_path):
    scenario = tmp_path / "chaos.yaml"
    scenario.write_text(yaml.safe_dump({
        "name": "planned-chaos", "workload": SHORT | {"request_rate": [8]},
        "faults": [{"at_s": 0.5, "action": "pause", "process": "agg-0", "duration_s": 0.5}],
        "limits": {"max_failed_requests": 8, "max_truncated_streams": 8,
                   "max_mismatched_outputs": 8, "max_recovery_s": 30}}))
    ledger = tmp_path / "ledger.jsonl"
    hurt = _cli("chaos", planned, "--scenario", scenario, "--out", tmp_path / "chaos",
                ledger=ledger, home=tmp_path, timeout=300)
    assert hurt.returncode == 0, hurt.stdout[-3000:] + hurt.stderr[-3000:]
    fault_free = BenchResult.model_validate_json(
        (tmp_path / "chaos" / "fault-free" / "results.json").read_text())
    (point,) = fault_free.points
    (entry,) = _entries(ledger)
    assert entry["fingerprint"] == point.fingerprint and entry["nearest_to_plan"]
    assert entry["measured"]["requests_per_s"] == pytest.approx(
        point.aiperf.request_throughput)
