"""The fault table of issue 13 against real graphs: each fault heals, or ends cleanly."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from chat_load import ClientThreads
from conftest import REPO, aiperf_processes, wait_until
from dis_serve.launch.graph import start_graph
from dis_serve.launch.node_data import lock_file
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import GraphPhase, ProcessState
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
QUICK = {"backoff_base_s": 0.2, "backoff_cap_s": 1.0, "max_failures": 2, "window_s": 60}


def _topology(name: str, base: int, **supervision) -> Topology:
    """The demo graph with two decode workers, on its own ports (tests use 18000-18999)."""
    data = relocated_demo(name, base)
    data["pools"]["decode"]["workers"] = 2
    data["supervision"] = supervision
    return Topology.model_validate(data)


def _chat(graph) -> bool:
    try:
        response = httpx.post(f"{graph.endpoint}/v1/chat/completions", timeout=15, json={
            "model": graph.model_name, "max_tokens": 4,
            "messages": [{"role": "user", "content": "w3 w4"}]})
    except httpx.HTTPError:
        return False
    return response.status_code == 200


class _Load(ClientThreads):
    """Chat requests back to back from two threads, each outcome kept with its end time."""

    def __init__(self, graph) -> None:
        super().__init__(2)
        self.graph = graph
        self.outcomes: list[tuple[float, bool]] = []

    def _run(self, _k: int) -> None:
        while not self._stop.is_set():
            ok = _chat(self.graph)
            self.outcomes.append((time.monotonic(), ok))


    def failed_between(self, start: float, end: float) -> int:
        return sum(1 for at, ok in list(self.outcomes) if start <= at <= end and not ok)


def _outcomes_after(load: _Load, after: int, count: int = 8) -> list[bool]:
    """Once `count` more requests than the first `after` have ended (polled, 10 s deadline),
    the outcome of every one that ended after those."""
    assert wait_until(lambda: len(load.outcomes) >= after + count, timeout=10)
    return [ok for _, ok in load.outcomes[after:]]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] != psutil.STATUS_ZOMBIE and any(
                text in part for part in proc.info["cmdline"] or []):
            found.append(proc.pid)
    return found


def _cli(home: Path, *args: str, **popen) -> subprocess.Popen[str]:
    return subprocess.Popen([DIS_SERVE, *args], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            env=os.environ | {"DIS_SERVE_HOME": str(home)}, **popen)


def test_etcd_nats_and_frontend_deaths_heal_under_load_within_10_s(tmp_path, capsys):
    with start_graph(_topology("it-heal", 18400), run_root=tmp_path) as graph, \
            _Load(graph) as load:
        for process, sig in (("etcd", signal.SIGKILL), ("nats", signal.SIGKILL),
                             ("frontend", signal.SIGTERM)):  # SIGTERM: a clean exit 0
            old = graph.status().process(process)
            hit = time.monotonic()
            os.killpg(old.pid, sig)
            assert wait_until(lambda p=process: (s := graph.status()).phase is GraphPhase.READY
                              and s.process(p).restarts == old.restarts + 1
                              and all(x.ready for x in s.processes), timeout=10), process
            back = time.monotonic()
            assert all(_outcomes_after(load, len(load.outcomes))), process
            with capsys.disabled():
                print(f"\n{process} {sig.name}: ready again after {back - hit:.1f} s, "
                      f"{load.failed_between(hit, back)} failed requests meanwhile")


def test_a_crash_looping_worker_is_given_up_alone_and_the_graph_serves_degraded(
        tmp_path, run_cli, monkeypatch):
    with start_graph(_topology("it-loop", 18430, workers=QUICK), run_root=tmp_path) as graph:
        for crash in range(2):
            victim = graph.status().process("decode-1")
            assert wait_until(lambda: graph.status().process("decode-1").ready, timeout=20)
            os.killpg(graph.status().process("decode-1").pid, signal.SIGKILL)
            assert wait_until(lambda v=victim: graph.status().process("decode-1").pid != v.pid
                              or graph.status().process("decode-1").state
                              is ProcessState.FAILED, timeout=10), crash
        assert wait_until(lambda: graph.status().phase is GraphPhase.DEGRADED, timeout=10)
        status = graph.status()
        assert status.process("decode-1").state is ProcessState.FAILED
        assert any(p.startswith("decode-1: crashed 2 times") for p in status.problems)
        assert all(_chat(graph) for _ in range(10))
        monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
        result = run_cli("status", "it-loop")
        assert result.exit_code == 3
        assert "it-loop: degraded" in result.stdout


def test_a_hung_worker_is_restarted_after_its_unanswered_probes(tmp_path, capsys):
    liveness = {"failures": 2, "period_s": 0.5, "timeout_s": 0.5}
    with start_graph(_topology("it-hung", 18460, liveness=liveness),
                     run_root=tmp_path) as graph:
        hung = graph.status().process("decode-0")
        stopped = time.monotonic()
        os.killpg(hung.pid, signal.SIGSTOP)
        assert wait_until(lambda: (p := graph.status().process("decode-0")).restarts == 1
                          and p.ready, timeout=15)
        with capsys.disabled():
            print(f"\nhung decode-0 replaced and ready after {time.monotonic() - stopped:.1f} s")
        assert not psutil.pid_exists(hung.pid) or psutil.Process(hung.pid).status() \
            == psutil.STATUS_ZOMBIE
        assert wait_until(lambda: graph.status().phase is GraphPhase.READY, timeout=10)
        assert all(_chat(graph) for _ in range(5))


def test_deleting_the_run_directory_costs_the_supervisor_nothing(tmp_path, capsys):
    home = tmp_path / "home"
    topo = tmp_path / "it-rmrf.yaml"
    topo.write_text(yaml.safe_dump(relocated_demo("it-rmrf", 18490)))
    run = RunDir.for_graph("it-rmrf", home)
    up = _cli(home, "up", str(topo), "--detach")
    try:
        assert up.wait(timeout=120) == 0, up.stderr.read()
        # The balancer's sockets and the files haproxy restarts from live outside it.
        own = Path(run.read_record().balancer_dir)
        assert own.is_dir() and run.path.resolve() not in own.parents
        shutil.rmtree(run.path)
        # The supervisor writes its record again, so `status` and `down` still find the graph.
        assert wait_until(lambda: (s := run.read_state()) is not None
                          and s.phase is GraphPhase.READY, timeout=5)
        # ... and it stays ready (the balancer's probe once failed within about 1.5 s; etcd,
        # whose data and TLS files are still the run directory's, lasts about 27 s).
        polled, until = 0, time.monotonic() + 5
        while time.monotonic() < until:
            status = _cli(home, "status", "it-rmrf")
            out, err = status.communicate(timeout=60)
            assert status.returncode == 0, out + err
            polled += 1
        state = run.read_state()
        assert all(p.ready for p in state.processes), state.problems
        assert _chat(state)  # through the balancer, at the endpoint clients use
        with capsys.disabled():
            print(f"\nready through {polled} status calls over 5 s after the rm -rf")
    finally:  # also when a step failed: a graph left running holds the next run's ports
        down = _cli(home, "down", "it-rmrf")
        down.wait(timeout=60)
    assert down.returncode == 0, down.stderr.read()
    assert _processes_mentioning(str(run.path)) == []
    assert _processes_mentioning(str(own)) == []
    assert not own.exists() and not lock_file(own).exists()


def test_a_killed_bench_leaves_no_aiperf_and_a_second_one_cannot_overlap(tmp_path):
    home = tmp_path / "home"
    scenario = tmp_path / "long.yaml"
    data = yaml.safe_load((REPO / "benchmarks" / "smoke.yaml").read_text())
    scenario.write_text(yaml.safe_dump(data | {"name": "long", "requests": 100_000,
                                               "concurrency": [1], "warmup_requests": 0}))
    with start_graph(_topology("it-bench", 18520), run_root=tmp_path) as graph:
        out = tmp_path / "out"
        args = ("bench", "--scenario", str(scenario), "--url", graph.endpoint,
                "--topology", str(REPO / "graphs" / "demo.yaml"), "--out", str(out),
                "--tokenizer", graph.plan.model_path)
        before = aiperf_processes()
        first = _cli(home, *args)
        try:
            assert wait_until(lambda: len(_processes_mentioning(str(out))) > 1, timeout=60)
            second = _cli(home, *args)
            assert second.wait(timeout=60) == 1
            assert "another sweep" in second.stderr.read()
            first.kill()  # SIGKILL: no chance to clean up
            first.wait()
            assert wait_until(lambda: _processes_mentioning(str(out)) == []
                              and aiperf_processes() - before == set(), timeout=10)
        finally:
            if first.poll() is None:
                first.kill()


def test_ctrl_c_of_a_detached_up_exits_130_in_one_line_and_leaves_nothing(tmp_path):
    home = tmp_path / "home"
    topo = tmp_path / "it-int.yaml"
    topo.write_text(yaml.safe_dump(relocated_demo("it-int", 18550)))
    up = _cli(home, "up", str(topo), "--detach")
    time.sleep(0.6)
    up.send_signal(signal.SIGINT)
    _, err = up.communicate(timeout=60)
    assert up.returncode == 130
    assert [line for line in err.splitlines() if line.strip()] == ["interrupted"]
    assert wait_until(lambda: _processes_mentioning(str(RunDir.for_graph("it-int", home).path))
                      == [], timeout=10)


def test_chaos_exits_1_naming_the_limit_a_fault_broke(tmp_path):
    topo = tmp_path / "it-chaos.yaml"
    topo.write_text(yaml.safe_dump(relocated_demo("it-chaos", 18580)))
    scenario = yaml.safe_load((REPO / "benchmarks" / "chaos-demo.yaml").read_text())
    scenario["workload"] |= {"requests": 120, "request_rate": [20]}
    scenario |= {"reference_run": False, "faults": [
        {"at_s": 1, "action": "kill", "process": "frontend"}],
        "limits": {"max_failed_requests": 0, "max_recovery_s": 10}}
    path = tmp_path / "chaos.yaml"
    path.write_text(yaml.safe_dump(scenario))
    chaos = _cli(tmp_path / "home", "chaos", str(topo), "--scenario", str(path), "--out",
                 str(tmp_path / "out"))
    out, err = chaos.communicate(timeout=240)
    assert chaos.returncode == 1, out + err
    assert "failed requests (limit 0)" in err
    assert "kill frontend" in out
    outcome = yaml.safe_load((tmp_path / "out" / "chaos.json").read_text())
    assert outcome["faults"][0]["recovery_s"] < 10
    assert outcome["failed"] > 0 and outcome["truncated"] == 0


def test_a_stopped_nats_makes_the_graph_degraded_and_is_restarted_as_hung(tmp_path, capsys):
    liveness = {"failures": 2, "period_s": 0.5, "timeout_s": 0.5}
    with start_graph(_topology("it-nats-stop", 18860, liveness=liveness),
                     run_root=tmp_path) as graph:
        nats = graph.status().process("nats")
        stopped = time.monotonic()
        os.killpg(nats.pid, signal.SIGSTOP)
        try:
            assert wait_until(lambda: (s := graph.status()).phase is GraphPhase.DEGRADED
                              and any(p.startswith("nats: does not answer") for p in s.problems),
                              timeout=5)
            degraded = time.monotonic()
            assert wait_until(lambda: (p := graph.status().process("nats")).restarts == 1
                              and p.ready, timeout=15)
        finally:
            with contextlib.suppress(ProcessLookupError):  # if it was not replaced
                os.killpg(nats.pid, signal.SIGCONT)
        assert wait_until(lambda: graph.status().phase is GraphPhase.READY, timeout=15)
        with capsys.disabled():
            print(f"\nSIGSTOP nats: degraded after {degraded - stopped:.1f} s, replaced and "
                  f"ready after {time.monotonic() - stopped:.1f} s")
        assert wait_until(lambda: _chat(graph), timeout=10)
        assert all(_chat(graph) for _ in range(5))


def test_etcd_restarted_without_its_data_gets_the_workers_registered_again(tmp_path, capsys):
    with start_graph(_topology("it-etcd-wipe", 18880), run_root=tmp_path) as graph, \
            _Load(graph) as load:
        _outcomes_after(load, 0)  # the load runs
        etcd = graph.status().process("etcd")
        workers = {p.name: p.restarts for p in graph.status().processes
                   if p.kind.value == "worker"}
        hit = time.monotonic()
        shutil.rmtree(graph.run_dir / "etcd-data")
        os.killpg(etcd.pid, signal.SIGKILL)
        assert wait_until(lambda: (s := graph.status()).phase is GraphPhase.READY
                          and all(s.process(n).restarts > r for n, r in workers.items())
                          and all(p.ready for p in s.processes), timeout=30)
        back = time.monotonic()
        assert all(_outcomes_after(load, len(load.outcomes)))
        with capsys.disabled():
            print(f"\netcd data deleted, etcd killed: ready again after {back - hit:.1f} s, "
                  f"{load.failed_between(hit, back)} of "
                  f"{sum(1 for at, _ in load.outcomes if hit <= at <= back)} requests failed")


@pytest.mark.parametrize("prefill_workers", [1, 2])
def test_a_killed_prefill_worker_heals_and_its_unmigrated_requests_are_counted(
        tmp_path, capsys, prefill_workers):
    """Dynamo 1.6.1 migrates a request whose decode worker dies, not one whose prefill
    worker dies (docs/chaos.md, "Why a prefill kill fails requests"): those fail, and the
    graph must be back, failing none, within 10 s."""
    topo = _topology("it-prefill-kill", 18920)
    topo = topo.model_copy(update={"pools": topo.pools.model_copy(update={
        "prefill": topo.pools.prefill.model_copy(update={"workers": prefill_workers})})})
    with start_graph(topo, run_root=tmp_path) as graph, _Load(graph) as load:
        _outcomes_after(load, 0)  # requests in flight when it dies
        victim = graph.status().process("prefill-0")
        hit = time.monotonic()
        os.killpg(victim.pid, signal.SIGKILL)
        assert wait_until(lambda: (s := graph.status()).phase is GraphPhase.READY
                          and s.process("prefill-0").restarts == 1, timeout=10)
        back = time.monotonic()
        assert all(_outcomes_after(load, len(load.outcomes)))
        during = [ok for at, ok in load.outcomes if hit <= at <= back]
        with capsys.disabled():
            print(f"\nprefill-0 SIGKILL ({prefill_workers} prefill workers): ready again "
                  f"after {back - hit:.1f} s, "
                  f"{during.count(False)} of {len(during)} requests failed meanwhile")
