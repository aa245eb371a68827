"""Fingerprints and `dis-serve diff`: every output directory says what produced it, secrets
never reach the file, and diffing two runs names exactly what was changed between them.
Bench output directories are built from the real AIPerf fixtures, the way `bench` writes them."""

from __future__ import annotations

import subprocess

import pytest

from conftest import REPO
from dis_serve.bench.report import RESULTS_JSON
from dis_serve.bench.run_diff import Category, diff_fingerprints, diff_results, load_run
from dis_serve.bench.runner import record_fingerprint
from dis_serve.bench.scenario import load_scenario
from dis_serve.errors import UserInputError
from dis_serve.evidence.fingerprint import (
    FINGERPRINT_FILE,
    REDACTED,
    capture,
    flatten,
    read_fingerprint,
    redact_environment,
    source_file,
)
from dis_serve.evidence.machine import cpu_model, parse_nvidia_smi
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.topology import Topology
from fixtures.aiperf.load import HERE, SMOKE, smoke_result

DISAGG = HERE / "disagg-c1" / "topology.yaml"


def _bench_dir(tmp_path, name: str, topology_text: str, graph: str = "disagg"):
    """An output directory as `bench` leaves it: fingerprint.json and results.json."""
    out = tmp_path / name
    out.mkdir()
    topology_file = out / "topology.yaml"
    topology_file.write_text(topology_text)
    topo = load_model_file(Topology, topology_file)
    record_fingerprint(out, "bench", {"topology": (topo, topology_file)}, load_scenario(SMOKE))
    (out / RESULTS_JSON).write_text(smoke_result(graph).model_dump_json())
    return out


def test_bench_output_gets_a_fingerprint_of_its_topology_scenario_and_machine(tmp_path):
    out = _bench_dir(tmp_path, "a", DISAGG.read_text())
    fp = read_fingerprint(out / FINGERPRINT_FILE)
    assert fp.command == "bench"
    topo = fp.topologies["topology"]
    assert topo.name == "bx" and topo.model.id == "dis-serve/tiny-mock"
    assert topo.settings["router.mode"] == "kv"
    assert topo.file is not None and len(topo.file.sha256) == 64
    assert fp.inputs["output_tokens.mean"] == 32
    assert fp.packages["aiperf"] == "0.13.0" and fp.packages["ai-dynamo"] == "1.6.1"
    assert fp.host.cpu_logical and fp.host.memory_gib > 0


def test_diff_of_two_runs_with_one_changed_setting_names_exactly_that_setting(tmp_path):
    a = _bench_dir(tmp_path, "a", DISAGG.read_text())
    b = _bench_dir(tmp_path, "b", DISAGG.read_text().replace("mode: kv", "mode: round-robin"))
    differences = diff_fingerprints(load_run(a), load_run(b))
    configuration = [d for d in differences if d.category is Category.CONFIGURATION]
    assert [(d.key, d.a, d.b) for d in configuration] == [
        ("topology.router.mode", "kv", "round-robin")]
    assert not [d for d in differences
                if d.category in (Category.VERSIONS, Category.HARDWARE, Category.ENVIRONMENT)]


def test_diff_cli_prints_the_setting_and_the_results_side_by_side(run_cli, tmp_path):
    a = _bench_dir(tmp_path, "a", DISAGG.read_text())
    b = _bench_dir(tmp_path, "b", (HERE / "agg-c4" / "topology.yaml").read_text(), graph="agg")
    result = run_cli("diff", a, b)
    assert result.exit_code == 0, result.stderr
    assert "  mode: disagg -> agg" in result.stdout.replace("topology.", "")
    assert "versions: same" in result.stdout and "hardware: same" in result.stdout
    rows = {(r.load, r.metric): r for r in diff_results(a, b)}
    throughput = rows[("concurrency 4", "Requests/s")]
    disagg, agg = smoke_result("disagg").points[1], smoke_result("agg").points[0]
    assert throughput.a == disagg.aiperf.request_throughput
    assert throughput.b == agg.aiperf.request_throughput
    assert f"{throughput.change_pct:+.1f}%" in result.stdout
    assert ("concurrency 1", "Requests/s") not in rows  # the agg run has no such point


def test_diff_of_a_directory_without_a_fingerprint_is_bad_input(tmp_path):
    with pytest.raises(UserInputError, match=r"no fingerprint\.json in"):
        load_run(tmp_path)


def test_secret_looking_variables_and_url_passwords_are_redacted():
    env = redact_environment({
        "HF_TOKEN": "hf_abc", "NATS_AUTH_PASSWORD": "pw", "AWS_SECRET_ACCESS_KEY": "k",
        "ETCD_AUTH_CLIENT_KEY": "/k.pem", "MY_CREDENTIALS_FILE": "/c",
        "ETCD_ENDPOINTS": "http://user:hunter2@10.0.0.1:2379", "PATH": "/usr/bin"})
    assert {k for k, v in env.items() if v == REDACTED} == {
        "HF_TOKEN", "NATS_AUTH_PASSWORD", "AWS_SECRET_ACCESS_KEY", "ETCD_AUTH_CLIENT_KEY",
        "MY_CREDENTIALS_FILE"}
    assert env["ETCD_ENDPOINTS"] == f"http://user:{REDACTED}@10.0.0.1:2379"
    assert env["PATH"] == "/usr/bin"


def test_the_written_fingerprint_holds_no_secret_value(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_very_secret_value")
    topo = load_model_file(Topology, DISAGG)
    text = capture("bench", {"topology": (topo, DISAGG)}).model_dump_json()
    assert "hf_very_secret_value" not in text
    assert '"HF_TOKEN":"<redacted>"' in text


def test_a_topology_file_edited_after_its_commit_is_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    path = tmp_path / "t.yaml"
    path.write_text(DISAGG.read_text())
    git("add", "t.yaml")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "t")
    clean = source_file(path)
    assert clean.git_dirty is False and clean.git_commit and len(clean.git_commit) == 40
    path.write_text(DISAGG.read_text().replace("mode: kv", "mode: random"))
    assert source_file(path).git_dirty is True


def test_a_file_outside_any_repository_has_no_git_state(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("x")
    assert (source_file(path).git_commit, source_file(path).git_dirty) == (None, None)


def test_trtllm_topologies_pin_each_engine_config_by_hash():
    topo = load_model_file(Topology, REPO / "graphs" / "llama70b-h100-disagg.yaml")
    fp = capture("bench", {"topology": (topo, None)})
    hashes = fp.topologies["topology"].engine_configs
    assert set(hashes) == {"prefill", "decode"} and hashes["prefill"] != hashes["decode"]


def test_settings_flatten_to_dotted_keys():
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {
        "a.b": 1, "a.c": "[1, 2]", "d": None}


def test_nvidia_smi_csv_gives_gpus_and_driver():
    gpus, driver = parse_nvidia_smi("NVIDIA H200, 143771, 570.124.06, GPU-1a2b\n")
    assert driver == "570.124.06"
    assert [(g.name, g.memory_mib, g.uuid) for g in gpus] == [("NVIDIA H200", 143771,
                                                               "GPU-1a2b")]


def test_cpu_model_is_read_from_cpuinfo():
    assert cpu_model("processor\t: 0\nmodel name\t: Intel Xeon\n") == "Intel Xeon"


def test_a_plan_output_gets_a_fingerprint_of_its_request(tmp_path):
    from dis_serve.plan.pipeline import run_plan
    from dis_serve.plan.request import build_request

    run_plan(build_request(model="llama-3.1-70b", isl=3000, osl=500, budget=48,
                           ttft_ms=1000.0, itl_ms=50.0, replay=False), tmp_path)
    fp = read_fingerprint(tmp_path / FINGERPRINT_FILE)
    assert fp.command == "plan" and fp.topologies == {}
    assert (fp.inputs["model"], fp.inputs["budget"]) == ("llama-3.1-70b", 48)
