"""A local graph that changes while it serves (`dis-serve scale`, `apply`), on real etcd,
NATS, frontend and mocker workers, under streaming load: no request fails or is cut short,
the change is in the run directory, refused changes leave the graph as it was."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from chat_load import StreamingChats
from conftest import dis_serve_at
from dis_serve.launch.change_record import read_change
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import ProcessState
from relocate import relocated_demo

pytestmark = pytest.mark.integration
NAME = "it-change"
BASE = 18960


class Graph:
    def __init__(self, home: Path, file: Path) -> None:
        self.home, self.file = home, file
        self.run = RunDir.for_graph(NAME, home)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return dis_serve_at(self.home, *args)

    def topology(self) -> dict:
        return yaml.safe_load(self.file.read_text())

    def write(self, data: dict) -> Path:
        path = self.file.with_name("edited.yaml")
        path.write_text(yaml.safe_dump(data))
        return path

    def workers(self, role: str) -> list[str]:
        """The workers of `role` the supervisor runs, ready, as its state file says."""
        state = self.run.read_state()
        assert state is not None
        return [p.name for p in state.processes if p.name.startswith(f"{role}-")
                and p.state is ProcessState.READY]

    def load(self) -> StreamingChats:
        state = self.run.read_state()
        assert state is not None
        return StreamingChats(state.endpoint, state.model_name, threads=4, max_tokens=48,
                              timeout_s=20)


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("change")
    data = relocated_demo(NAME, BASE)
    data["pools"]["decode"]["max_workers"] = 4
    file = tmp / f"{NAME}.yaml"
    file.write_text(yaml.safe_dump(data))
    live = Graph(tmp / "home", file)
    up = live.cli("up", str(file), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield live
    finally:
        down = live.cli("down", NAME)
        assert down.returncode == 0, down.stderr


def _no_failures(load: StreamingChats) -> None:
    outcomes = list(load.outcomes)
    assert outcomes, "the load sent nothing"
    bad = [o.problem for o in outcomes if not o.ok]
    short = [o.tokens for o in outcomes if o.ok and o.tokens != load.max_tokens]
    assert (bad, short) == ([], []), f"failed {bad}, truncated {short} of {len(outcomes)}"


def test_scale_up_and_down_under_streaming_load_fails_and_truncates_nothing(graph):
    with graph.load() as load:
        up = graph.cli("scale", NAME, "decode=3")
        assert up.returncode == 0, up.stdout + up.stderr
        assert graph.workers("decode") == ["decode-0", "decode-1", "decode-2"]
        down = graph.cli("scale", NAME, "decode=1")
        assert down.returncode == 0, down.stdout + down.stderr
        assert graph.workers("decode") == ["decode-0"]
    _no_failures(load)
    change = read_change(graph.run.path)
    assert change is not None and change.state.value == "done"
    assert graph.run.read_plan().revision == 2  # recorded: a restarted supervisor starts this


def test_apply_rolls_the_decode_pools_engine_settings_under_load(graph):
    data = graph.topology()
    data["pools"]["decode"]["max_batch_size"] = 128
    with graph.load() as load:
        applied = graph.cli("apply", str(graph.write(data)))
        assert applied.returncode == 0, applied.stdout + applied.stderr
    _no_failures(load)
    assert "decode: roll decode-0 (pools.decode.max_batch_size changed)" in applied.stdout
    (new,) = graph.workers("decode")
    assert new != "decode-0"
    assert "128" in graph.run.read_plan().process(new).argv
    assert graph.run.read_topology().pools.decode.max_batch_size == 128


def test_apply_dry_run_prints_the_change_and_its_steps_and_changes_nothing(graph):
    data = graph.topology()
    data["pools"]["decode"] |= {"workers": 2, "max_batch_size": 128}
    revision = graph.run.read_plan().revision
    dry = graph.cli("apply", str(graph.write(data)), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "decode: 1 -> 2 workers (add 1)" in dry.stdout
    assert "step 1: decode 1 -> 2" in dry.stdout
    assert "dry run: nothing changed" in dry.stdout
    assert graph.run.read_plan().revision == revision


def test_a_change_the_gpus_cannot_hold_is_one_line_exit_2_and_changes_nothing(graph):
    revision = graph.run.read_plan().revision
    too_many = graph.cli("scale", NAME, "decode=5")
    assert too_many.returncode == 2
    assert too_many.stderr.count("\n") == 1 and "max_workers" in too_many.stderr
    data = graph.topology()
    data["pools"]["prefill"]["workers"] = 6  # and 3 decode workers: 9 of the 8 GPUs
    data["pools"]["decode"] |= {"workers": 3, "max_batch_size": 128}
    refused = graph.cli("apply", str(graph.write(data)))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "pools need 9 GPUs" in refused.stderr
    assert graph.run.read_plan().revision == revision


def test_a_changed_model_is_refused_in_one_line_and_leaves_the_graph_as_it_was(graph):
    revision = graph.run.read_plan().revision
    data = graph.topology()
    data["model"]["served_name"] = "another-model"
    refused = graph.cli("apply", str(graph.write(data)))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "model.served_name changed; a running graph cannot take it" in refused.stderr
    assert graph.run.read_plan().revision == revision
    assert graph.workers("prefill") == ["prefill-0"]


@pytest.mark.parametrize(("args", "says"), [
    (["decode=x"], "'decode=x' is not POOL=N"),
    (["agg=2"], "has no pool 'agg'"),
    (["decode=0"], "below pools.decode.min_workers (1)"),
    (["decode=2", "decode=3"], "decode is given twice"),
])
def test_bad_scale_input_is_one_line_exit_2(graph, args, says):
    result = graph.cli("scale", NAME, *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and says in result.stderr, result.stderr
