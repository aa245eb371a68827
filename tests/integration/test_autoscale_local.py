"""A local graph resized by Dynamo 1.6.1's own planner (`autoscale`, `environment: virtual`),
on real etcd, NATS, frontend and mocker workers: dis-serve's scaler carries out and
acknowledges each decision; the decode pool grows under load and shrinks when idle, no
request failing."""

from __future__ import annotations

import time

import pytest
import yaml

from chat_load import StreamingChats
from conftest import dis_serve_at
from dis_serve.launch.change_record import read_history
from dis_serve.launch.rundir import RunDir
from dis_serve.launch.status import ProcessState
from relocate import relocated_demo

pytestmark = pytest.mark.integration
NAME = "it-auto"
BASE = 18975


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("auto")
    data = relocated_demo(NAME, BASE)
    data["pools"]["decode"]["max_workers"] = 3
    # A KV cache of 8,192 tokens per decode worker, so 12 streams load it past half.
    data["mocker"] = {"num_gpu_blocks": 256}
    data["autoscale"] = {"load_interval_s": 1, "system_port": BASE + 20}  # scaler +21
    file = tmp / f"{NAME}.yaml"
    file.write_text(yaml.safe_dump(data))
    home = tmp / "home"
    up = dis_serve_at(home, "up", str(file), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        yield RunDir.for_graph(NAME, home)
    finally:
        down = dis_serve_at(home, "down", NAME)
        assert down.returncode == 0, down.stderr


def _ready(run: RunDir, prefix: str) -> list[str]:
    state = run.read_state()
    assert state is not None
    return [p.name for p in state.processes if p.name.startswith(prefix)
            and p.state is ProcessState.READY]


def _until(check, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout_s:g} s: {what}"
        time.sleep(0.5)


def test_the_planner_grows_decode_under_load_and_shrinks_it_when_idle(graph):
    # The planner waits 2 x 10 s for profiling data the mocker does not serve.
    _until(lambda: _ready(graph, "planner") == ["planner"], 90, "the planner ready")
    state = graph.read_state()
    assert state is not None
    with StreamingChats(state.endpoint, state.model_name, threads=12, max_tokens=400,
                        timeout_s=30) as load:
        _until(lambda: len(_ready(graph, "decode-")) >= 2, 60, "a second decode worker")
    assert [o.problem for o in load.outcomes if not o.ok] == []
    assert all(o.tokens == load.max_tokens for o in load.outcomes if o.ok)
    _until(lambda: len(_ready(graph, "decode-")) == 1 and graph.read_plan().revision >= 2,
           90, "decode back to one worker when idle")
    history = read_history(graph.path)
    assert history and all(c.source.startswith("planner (decision ") for c in history)
    assert all(c.state.value == "done" for c in history)
