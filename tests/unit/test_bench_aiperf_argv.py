"""The `aiperf profile` command line dis-serve builds is one AIPerf 0.13.0 itself accepts.

Each argv goes through AIPerf's own CLI parser and config resolver (no process, no network),
and the resolved config is checked for what the scenario asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import REPO
from dis_serve.bench.aiperf_run import AiperfTarget, build_argv
from dis_serve.bench.scenario import Scenario, load_scenario
from dis_serve.yaml_input import parse_model

SMOKE = load_scenario(REPO / "benchmarks" / "smoke.yaml")
TARGET = AiperfTarget(url="http://127.0.0.1:28000", model="demo-model", tokenizer="/tmp/card",
                      extra_metrics_urls=("http://127.0.0.1:28100/metrics",
                                          "http://127.0.0.1:28101/metrics"))


def _resolve(argv: list[str]):
    """AIPerf's own parse + validation of everything after `aiperf profile`."""
    from aiperf.cli_commands.profile import app
    from aiperf.config.flags.resolver import resolve_config

    assert argv[1] == "profile"
    _, bound, _ = app.parse_args(argv[2:])
    return resolve_config(bound.kwargs["cli_config"], None).benchmark


def _variant(**changes) -> Scenario:
    data = yaml.safe_load((REPO / "benchmarks" / "smoke.yaml").read_text())
    for key, value in changes.items():
        if value is None:
            data.pop(key, None)
        else:
            data[key] = value
    return parse_model(Scenario, data, "variant")


def _profiling(config):
    return next(p for p in config.phases if p.kind == "profiling")


def test_smoke_point_resolves_to_the_scenario(tmp_path):
    point = SMOKE.points()[-1]
    config = _resolve(build_argv(SMOKE, point, TARGET, tmp_path))
    profiling = _profiling(config)
    assert profiling.type == "concurrency"
    assert profiling.concurrency == point.value
    assert profiling.requests == SMOKE.requests
    prompts = config.datasets[0].prompts
    assert prompts.isl.mean == SMOKE.input_tokens.mean
    assert prompts.isl.stddev == SMOKE.input_tokens.stddev
    assert prompts.osl.mean == SMOKE.output_tokens.mean
    assert config.datasets[0].random_seed == SMOKE.random_seed
    assert config.endpoint.streaming is True
    assert config.endpoint.urls == [TARGET.url]


def test_sla_becomes_aiperfs_goodput_slos(tmp_path):
    config = _resolve(build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path))
    assert config.slos == {"time_to_first_token": SMOKE.sla.ttft_ms,
                           "inter_token_latency": SMOKE.sla.itl_ms}


def test_warmup_becomes_an_excluded_phase(tmp_path):
    config = _resolve(build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path))
    warmup = next(p for p in config.phases if p.kind == "warmup")
    assert warmup.requests == SMOKE.warmup_requests
    assert warmup.exclude_from_results is True


def test_worker_metrics_urls_are_scraped_besides_the_frontend(tmp_path):
    config = _resolve(build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path))
    assert config.server_metrics.enabled is True
    assert list(config.server_metrics.urls) == list(TARGET.extra_metrics_urls)


def test_ignore_eos_is_sent_with_every_request(tmp_path):
    config = _resolve(build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path))
    assert config.endpoint.extra == {"ignore_eos": True}


def test_artifacts_go_to_the_points_directory(tmp_path):
    config = _resolve(build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path / "p"))
    assert Path(config.artifacts.dir) == tmp_path / "p"


def test_request_rate_and_duration_point(tmp_path):
    scenario = _variant(concurrency=None, request_rate=[2.5], requests=None, duration_s=20)
    config = _resolve(build_argv(scenario, scenario.points()[0], TARGET, tmp_path))
    profiling = _profiling(config)
    assert profiling.type == "poisson"
    assert profiling.rate == 2.5
    assert profiling.duration == 20


def test_without_streaming_no_goodput_is_asked(tmp_path):
    # AIPerf 0.13 hangs when TTFT/ITL SLOs are given to a non-streaming run.
    scenario = _variant(streaming=False)
    argv = build_argv(scenario, scenario.points()[0], TARGET, tmp_path)
    assert "--goodput" not in argv
    config = _resolve(argv)
    assert config.endpoint.streaming is False
    assert not config.slos


@pytest.mark.parametrize("flag", ["--ui-type", "--export-level", "--no-gpu-telemetry"])
def test_runs_headless_and_light(tmp_path, flag):
    assert flag in build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path)
