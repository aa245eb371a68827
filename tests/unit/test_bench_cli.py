"""`dis-serve bench` / `compare` on bad input: one line naming what to fix, exit 2, and nothing
started (every case here fails before a graph or AIPerf would run)."""

from __future__ import annotations

import pytest

from conftest import GRAPHS, REPO, assert_one_line_error

SMOKE = REPO / "benchmarks" / "smoke.yaml"


def test_missing_scenario_file(run_cli, tmp_path):
    result = run_cli("bench", "--scenario", tmp_path / "nope.yaml", "--url", "http://127.0.0.1:1")
    assert_one_line_error(result, "nope.yaml", "file not found")


def test_scenario_with_a_typo_names_key_and_suggestion(run_cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SMOKE.read_text().replace("warmup_requests:", "warmup_request:"))
    result = run_cli("bench", "--scenario", path, "--url", "http://127.0.0.1:1")
    assert_one_line_error(result, "s.yaml", "warmup_request", "did you mean 'warmup_requests'")


def test_baseline_needs_max_regression(run_cli):
    result = run_cli("bench", "--scenario", SMOKE, "--baseline", "b.json")
    assert_one_line_error(result, "--max-regression", "go together")


def test_max_regression_needs_a_baseline(run_cli):
    result = run_cli("bench", "--scenario", SMOKE, "--max-regression", "10")
    assert_one_line_error(result, "--baseline", "go together")


def test_missing_baseline_file_fails_before_benchmarking(run_cli, tmp_path):
    result = run_cli("bench", "--scenario", SMOKE, "--url", "http://127.0.0.1:1",
                     "--baseline", tmp_path / "b.json", "--max-regression", "10")
    assert_one_line_error(result, "b.json", "baseline file not found")


def test_two_different_topologies_are_refused(run_cli):
    result = run_cli("bench", GRAPHS / "demo.yaml", "--topology", GRAPHS / "agg-mocker.yaml",
                     "--scenario", SMOKE)
    assert_one_line_error(result, "two topologies given")


def test_bad_topology_is_reported_like_validate(run_cli, tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text((GRAPHS / "demo.yaml").read_text().replace("served_name:", "servd_name:"))
    result = run_cli("bench", "--url", "http://127.0.0.1:1", "--topology", path,
                     "--scenario", SMOKE)
    assert_one_line_error(result, "t.yaml", "model.servd_name", "did you mean 'served_name'")


def test_compare_with_a_missing_topology(run_cli, tmp_path):
    result = run_cli("compare", GRAPHS / "demo.yaml", tmp_path / "b.yaml", "--scenario", SMOKE)
    assert_one_line_error(result, "b.yaml", "file not found")


def test_negative_max_regression_is_refused(run_cli):
    result = run_cli("bench", "--scenario", SMOKE, "--baseline", "b.json",
                     "--max-regression", "-5")
    assert_one_line_error(result, "--max-regression", "negative")


def test_a_baseline_of_another_topology_is_refused_before_any_point_runs(run_cli):
    # The URL answers nothing: a check made after the sweep started would fail on it first.
    result = run_cli("bench", "--scenario", SMOKE, "--url", "http://127.0.0.1:1",
                     "--topology", GRAPHS / "agg-mocker.yaml", "--baseline",
                     REPO / "benchmarks" / "baselines" / "smoke-demo.json",
                     "--max-regression", "10")
    assert_one_line_error(result, "smoke-demo.json", "baseline is for topology 'demo'")


@pytest.mark.parametrize("url", ["http://[::1", "localhost:8000", "ftp://127.0.0.1:8000",
                                 "http://127.0.0.1:99999", "http://127.0.0.1:8000/v1?x=1"])
def test_a_malformed_url_is_bad_input(run_cli, url):
    result = run_cli("bench", "--scenario", SMOKE, "--url", url)
    assert_one_line_error(result, "--url")


def test_compare_needs_a_second_topology_or_vary(run_cli):
    result = run_cli("compare", GRAPHS / "agg-mocker.yaml", "--scenario", SMOKE)
    assert_one_line_error(result, "--vary", "two topologies, or one topology and --vary")


def test_compare_refuses_vary_with_two_topologies(run_cli):
    result = run_cli("compare", GRAPHS / "agg-mocker.yaml", GRAPHS / "demo.yaml",
                     "--vary", "router.mode=kv,round-robin", "--scenario", SMOKE)
    assert_one_line_error(result, "--vary", "two topologies, or one topology and --vary")


def test_vary_value_the_topology_refuses_is_one_line(run_cli):
    result = run_cli("compare", GRAPHS / "agg-mocker.yaml", "--vary",
                     "router.mode=kv,fastest", "--scenario", SMOKE)
    assert_one_line_error(result, "router.mode=fastest", "router.mode")


def test_reset_prefix_cache_cannot_restart_a_graph_it_does_not_own(run_cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SMOKE.read_text() + "reset_prefix_cache: true\n")
    result = run_cli("bench", "--scenario", path, "--url", "http://127.0.0.1:1")
    assert_one_line_error(result, "--url", "reset_prefix_cache")
