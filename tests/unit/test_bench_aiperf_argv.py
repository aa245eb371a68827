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
from dis_serve.bench.scenario import LoadKind, Scenario, SweepPoint, load_scenario
from dis_serve.inputs.yaml_input import parse_model

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


def _shipped(name: str) -> Scenario:
    return load_scenario(REPO / "benchmarks" / f"{name}.yaml")


def test_shared_prefix_becomes_aiperfs_prefix_prompt_pool(tmp_path):
    scenario = _shipped("shared-prefix")
    config = _resolve(build_argv(scenario, scenario.points()[0], TARGET, tmp_path))
    prompts, prefix = config.datasets[0].prompts, config.datasets[0].prefix_prompts
    assert prefix.pool_size == scenario.shared_prefix.prefixes
    # The prefix and the unique part add up to the scenario's prompt length.
    assert prefix.length + prompts.isl.mean == scenario.input_tokens.mean
    assert prefix.length == round(scenario.shared_prefix.ratio * scenario.input_tokens.mean)
    assert prompts.corpus == "sonnet"


def test_multi_turn_becomes_aiperfs_conversations(tmp_path):
    scenario = _shipped("multi-turn")
    config = _resolve(build_argv(scenario, scenario.points()[0], TARGET, tmp_path))
    dataset = config.datasets[0]
    assert dataset.turns.mean == scenario.multi_turn.turns
    assert dataset.entries == scenario.multi_turn.conversations
    assert _profiling(config).sessions == scenario.multi_turn.conversations


@pytest.mark.parametrize("speedup", [1.0, 4.0])
def test_trace_is_replayed_on_its_timestamps_at_the_points_speedup(tmp_path, speedup):
    scenario = _shipped("trace")
    point = SweepPoint(kind=LoadKind.SPEEDUP, value=speedup)
    config = _resolve(build_argv(scenario, point, TARGET, tmp_path))
    dataset = config.datasets[0]
    assert dataset.format == "mooncake_trace"
    assert dataset.path == scenario.trace.file
    assert dataset.block_size == scenario.trace.block_size
    assert (dataset.synthesis.speedup_ratio if dataset.synthesis else 1.0) == speedup
    profiling = _profiling(config)
    assert profiling.type == "fixed_schedule"
    assert profiling.requests == len(scenario.trace.file.read_text().splitlines())


def test_every_request_is_recorded_for_cdfs_and_buckets(tmp_path):
    argv = build_argv(SMOKE, SMOKE.points()[0], TARGET, tmp_path)
    assert argv[argv.index("--export-level") + 1] == "records"
