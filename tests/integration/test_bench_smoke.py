"""`dis-serve bench` and `compare` against real mocker graphs with real AIPerf runs.

One demo graph (ports 28000-28020) serves the `--url` tests; `compare` brings its own two
graphs up and down on ports 28500-28520. Scenarios are kept to seconds of load per point.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from conftest import GRAPHS, REPO, aiperf_processes
from dis_serve.bench.metrics import BenchResult
from dis_serve.bench.progress import SilentObserver
from dis_serve.bench.scenario import load_scenario
from dis_serve.bench.sweep import point_file, run_sweep
from dis_serve.bench.target import make_target
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.launch.graph import start_graph
from dis_serve.topology import Topology
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
SMOKE = REPO / "benchmarks" / "smoke.yaml"


def _topology_file(folder: Path, source: Path, name: str, base: int, file_name: str = "",
                   **changes) -> Path:
    """A shipped graph under another name, on ports base..base+20 (bench tests: 28000-28999)."""
    data = relocate(yaml.safe_load(source.read_text()), name, base)
    data["model"].update(changes)
    path = folder / f"{file_name or name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _scenario_file(folder: Path, name: str, **changes) -> Path:
    """A one-point scenario of a few short requests."""
    data = {"name": name, "input_tokens": {"mean": 64}, "output_tokens": {"mean": 16},
            "requests": 8, "concurrency": [2], "sla": {"ttft_ms": 500, "itl_ms": 50}} | changes
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _cli(home: Path, *args, timeout: float = 280) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False,
                          env=os.environ | {"DIS_SERVE_HOME": str(home), "COLUMNS": "120"})


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(proc.info["cmdline"] or [])
        if text in cmdline:
            found.append(cmdline)
    return found


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("bench-home")


@pytest.fixture(scope="module")
def demo_file(home) -> Path:
    return _topology_file(home, GRAPHS / "demo.yaml", "bench-demo", 28000)


@pytest.fixture(scope="module")
def demo_graph(home, demo_file):
    topo = load_model_file(Topology, demo_file)
    with start_graph(topo, run_root=home) as graph:
        yield graph


@pytest.fixture(scope="module")
def smoke_run(home, demo_graph, demo_file):
    """`make demo`'s command: smoke.yaml against the running demo graph."""
    out = home / "smoke"
    result = _cli(home, "bench", "--scenario", SMOKE, "--url", demo_graph.endpoint,
                  "--topology", demo_file, "--out", out,
                  "--write-baseline", out / "fresh-baseline.json")
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result


def test_smoke_on_the_demo_graph_writes_the_report_with_both_plots(smoke_run, demo_file):
    out, cli = smoke_run
    for name in ("report.md", "results.json", "results.csv", "pareto.png", "latency.png"):
        assert (out / name).is_file(), name
    result = BenchResult.model_validate_json((out / "results.json").read_text())
    topo = load_model_file(Topology, demo_file)
    assert [p.point for p in result.points] == load_scenario(SMOKE).points()
    for point in result.points:
        assert point.aiperf.errors == 0
        assert point.aiperf.completed_requests == result.scenario.requests
        assert point.gpus == topo.total_gpus
        assert point.tokens_per_s_per_gpu > 0
        assert [p.pool for p in point.server.pools] == ["prefill", "decode"]
        assert point.server.unreachable == []
    assert "report: " in cli.stdout
    assert "prefix cache at each point's start: 1 warm" in cli.stdout  # --url: history unknown


def test_gate_passes_on_a_fresh_baseline_without_rerunning(home, smoke_run, demo_graph,
                                                             demo_file):
    out, _ = smoke_run
    result = _cli(home, "bench", "--scenario", SMOKE, "--url", demo_graph.endpoint,
                  "--topology", demo_file, "--out", out,
                  "--baseline", out / "fresh-baseline.json", "--max-regression", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "reused" in result.stdout
    assert "gate passed" in result.stdout


def test_gate_fails_on_a_doctored_baseline_naming_metric_and_percent(home, smoke_run,
                                                                     demo_graph, demo_file):
    out, _ = smoke_run
    baseline = json.loads((out / "fresh-baseline.json").read_text())
    point = baseline["points"][1]["aiperf"]
    point["request_throughput"] *= 2
    doctored = out / "doctored-baseline.json"
    doctored.write_text(json.dumps(baseline))
    result = _cli(home, "bench", "--scenario", SMOKE, "--url", demo_graph.endpoint,
                  "--topology", demo_file, "--out", out,
                  "--baseline", doctored, "--max-regression", "20")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "request_throughput at concurrency 4" in result.stderr
    assert "50.0% worse" in result.stderr


def test_interrupted_sweep_keeps_finished_points_and_resumes(home, demo_graph, demo_file):
    scenario = load_scenario(_scenario_file(home, "resume", concurrency=[1, 2]))
    topo = load_model_file(Topology, demo_file)
    target = make_target(topo, url=demo_graph.endpoint, plan=demo_graph.plan,
                         tokenizer=demo_graph.plan.model_path, topology_file=demo_file)
    out = home / "resume"
    first, second = scenario.points()

    class InterruptSecondPoint(SilentObserver):
        def point_tick(self, point, elapsed_s, finished_requests):
            if point == second and elapsed_s > 1.0:
                raise KeyboardInterrupt

    before = aiperf_processes()
    with pytest.raises(KeyboardInterrupt):
        run_sweep(scenario, target, out, InterruptSecondPoint())
    assert point_file(out, first).is_file()
    assert not point_file(out, second).exists()
    assert aiperf_processes() - before == set()  # AIPerf stopped, nothing left behind

    class Recorder(SilentObserver):
        reused, started = [], []

        def point_reused(self, point, result):
            self.reused.append(point)

        def point_started(self, point, expected_requests, duration_s):
            self.started.append(point)

    recorder = Recorder()
    result = run_sweep(scenario, target, out, recorder)
    assert recorder.reused == [first]
    assert recorder.started == [second]
    assert [p.point for p in result.points] == [first, second]
    assert result.resumed_points == 1


def test_aiperf_failure_shows_its_last_lines(home, demo_graph, demo_file):
    # Every request times out, so AIPerf itself fails the run.
    scenario = _scenario_file(home, "all-time-out", request_timeout_s=0.001)
    result = _cli(home, "bench", "--scenario", scenario, "--url", demo_graph.endpoint,
                  "--topology", demo_file, "--out", home / "fails")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "aiperf failed at concurrency 2" in result.stderr
    assert "inference request(s) failed" in result.stderr
    assert "full log:" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreachable_endpoint_is_one_line(home, demo_file):
    result = _cli(home, "bench", "--scenario", SMOKE, "--url", "http://127.0.0.1:28999",
                  "--topology", demo_file, "--out", home / "unreachable")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot reach http://127.0.0.1:28999" in lines[0], lines


def test_model_the_graph_does_not_serve_is_one_line(home, demo_graph):
    other = _topology_file(home, GRAPHS / "demo.yaml", "bench-demo", 28000,
                           file_name="other-model", served_name="other-model")
    result = _cli(home, "bench", "--scenario", SMOKE, "--url", demo_graph.endpoint,
                  "--topology", other, "--out", home / "wrong-model")
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert "does not serve model 'other-model'; it serves: demo-model" in lines[0]


def test_compare_runs_agg_and_disagg_side_by_side_and_stops_both(home):
    agg = _topology_file(home, GRAPHS / "agg-mocker.yaml", "cmp-agg", 28500)
    disagg = _topology_file(home, GRAPHS / "demo.yaml", "cmp-disagg", 28500)
    out = home / "compare"
    result = _cli(home, "compare", agg, disagg, "--scenario", _scenario_file(home, "cmp"),
                  "--out", out)
    assert result.returncode == 0, result.stdout + result.stderr
    text = (out / "compare.md").read_text()
    assert "# Compare: `cmp-agg` vs `cmp-disagg`, scenario `cmp`" in text
    assert (out / "compare.png").is_file()
    for name in ("cmp-agg", "cmp-disagg"):
        assert (out / name / "report.md").is_file()
        assert _processes_mentioning(str(home / "runs" / name)) == []
    assert "cmp-agg" in result.stdout and "cmp-disagg" in result.stdout
