"""Shared fixtures: run the CLI in-process exactly as a user would from a shell."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
import types
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
GRAPHS = REPO / "graphs"
# Helpers the tests share with the benchmarks (relocate) live beside the benchmarks.
sys.path.insert(0, str(REPO / "benchmarks"))
# AIPerf scrapes the graph's metrics a last time 2 s (its default) after the last response,
# for servers that publish late; Dynamo's frontend and workers count a request as it ends,
# so 0.2 s does here. That wait was 2 s of each of the suite's ~30 AIPerf runs. Every bench
# and chaos the tests start inherits it; `make bench` and users keep AIPerf's default.
os.environ.setdefault("AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD", "0.2")


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_cli(capsys, monkeypatch):
    """Call `dis-serve ARGS...` through the real entry point (error handling included)."""
    from dis_serve.cli.app import main

    def run(*args: str) -> CliResult:
        monkeypatch.setattr(sys, "argv", ["dis-serve", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def assert_one_line_error(result: CliResult, *fragments: str, code: int = 2) -> None:
    """What every bad input must give: one line on stderr naming what is wrong, no traceback."""
    assert result.exit_code == code, result
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def topology_variant(base: dict, **paths) -> str:
    """The topology mapping `base` with dotted-path keys (`frontend__port`) replaced, as YAML
    text."""
    import copy

    import yaml

    data = copy.deepcopy(base)
    for dotted, value in paths.items():
        node = data
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return yaml.safe_dump(data, sort_keys=False)


# A multi-node graph with every service on the head node alone, as before frontend replicas
# and etcd and NATS clusters: for the tests of what does not depend on how services spread.
SINGLE_HEAD = {"frontend": {"replicas": 1},
               "coordination": {"etcd": {"members": 1}, "nats": {"members": 1}}}


def single_head(data: dict) -> dict:
    """The topology mapping `data` with one frontend, one etcd and one NATS, on the head."""
    import copy

    moved = copy.deepcopy(data)
    for section, values in SINGLE_HEAD.items():
        target = moved.setdefault(section, {})
        for key, value in values.items():
            target[key] = (dict(target.get(key) or {}) | value if isinstance(value, dict)
                           else value)
    return moved


def single_head_data(graph: str) -> dict:
    """graphs/<graph> as a mapping, with every service on the head (`single_head`)."""
    import yaml

    return single_head(yaml.safe_load((GRAPHS / graph).read_text()))


def single_head_topology(path):
    """The topology file at `path` with every service on the head (`single_head`)."""
    import yaml

    from dis_serve.topology import Topology

    return Topology.model_validate(single_head(yaml.safe_load(path.read_text())))


def aiperf_processes() -> set[int]:
    """AIPerf's controller and its service processes (they retitle themselves `aiperf ...`)."""
    import psutil

    found = set()
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        cmdline = " ".join(proc.info["cmdline"] or [])
        if cmdline.startswith("aiperf") or "/aiperf profile" in cmdline:
            found.add(proc.pid)
    return found


DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")


def dis_serve_at(home: Path, *args: str, timeout: float = 240,
                 env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`dis-serve ARGS` as a user whose DIS_SERVE_HOME is `home` runs it (a real process), in
    `env` (a test bed's, say) or this process's environment."""
    base = os.environ if env is None else env
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=timeout,
                          env=base | {"DIS_SERVE_HOME": str(home)}, check=False)


def wait_until(predicate, timeout: float = 20.0) -> bool:
    """Poll `predicate` until it holds or `timeout` seconds pass; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def require_netns() -> None:
    """Skip (fail in CI, which runs as root) where network namespaces with Slurm in them
    cannot be made here."""
    from netns_cluster import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the multi-node tests: {reason}")
        pytest.skip(f"no multi-node test bed: {reason}")


@pytest.fixture(scope="module")
def netns_cluster(tmp_path_factory):
    """A 3-node Slurm cluster, one network namespace per node (tests/netns_cluster.py), for
    one test module; torn down (and checked gone) after it, also when a test failed.
    Skips with the reason where namespaces cannot be made, except in CI, which runs as root
    and must run these tests."""
    from netns_cluster import NetnsCluster, leftovers

    require_netns()
    cluster = NetnsCluster.start(tmp_path_factory.mktemp("netns-slurm"), nodes=3)
    try:
        yield cluster
    finally:
        cluster.stop()
    assert leftovers(cluster.tag) == []
    assert cluster.live_pids() == []


@dataclass(frozen=True)
class DynamoSchemas:
    dgd: type
    """dynamo.profiler.utils.config.Config: Dynamo 1.6.1's model of a DynamoGraphDeployment."""
    planner: type
    """dynamo.planner.config.planner_config.PlannerConfig: what `dynamo.planner --config`
    accepts."""


@pytest.fixture(scope="session")
def dynamo_schemas() -> DynamoSchemas:
    """Dynamo 1.6.1's own pydantic models, imported as shipped (the planner's
    `aisimulate_core` is compat/aisimulate-core, which `make install` installs)."""
    from dynamo.planner.config.planner_config import PlannerConfig
    from dynamo.profiler.utils.config import Config

    return DynamoSchemas(dgd=Config, planner=PlannerConfig)


# The Kubernetes release whose OpenAPI schema pod templates are checked against.
KUBERNETES_VERSION = "1.33"


def validate_pod_template(template: dict) -> None:
    """Raise unless `template` is a valid core/v1 PodTemplateSpec (unknown fields included),
    checked by kubernetes-validate against Kubernetes' own schema."""
    import kubernetes_validate

    kubernetes_validate.validate(
        {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"},
         "template": template}, KUBERNETES_VERSION, strict=True)


def validate_manifest(document: dict) -> None:
    """Raise unless a built-in Kubernetes object (Job, PVC, NetworkPolicy, Service,
    ConfigMap) is valid against Kubernetes' own schema, unknown fields included."""
    import kubernetes_validate

    kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)


K8S_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "k8s"
# Custom resources' schemas, as published by their projects (tests/fixtures/k8s/).
CRDS = {"DynamoGraphDeployment": "nvidia.com_dynamographdeployments.yaml.gz",
        "Certificate": "cert-manager.io_certificates.yaml",
        "Issuer": "cert-manager.io_issuers.yaml.gz",
        "PodMonitor": "monitoring.coreos.com_podmonitors.yaml.gz"}


def _strict(schema):
    """A CRD's structural schema as Kubernetes' API server prunes it, made to refuse what it
    would silently drop: unknown fields, except under x-kubernetes-preserve-unknown-fields."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in \
            out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_schema(kind: str, version: str) -> dict:
    import gzip

    import yaml

    path = K8S_FIXTURES / CRDS[kind]
    data = path.read_bytes()
    text = (gzip.decompress(data) if path.suffix == ".gz" else data).decode()
    [crd] = [doc for doc in yaml.safe_load_all(text) if doc]
    served = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return _strict(served["schema"]["openAPIV3Schema"])


def validate_custom_resource(document: dict) -> None:
    """Raise unless a custom resource (a DynamoGraphDeployment, a cert-manager Certificate or
    Issuer, a PodMonitor) is valid against its project's CRD, unknown fields included."""
    import jsonschema

    version = document["apiVersion"].rsplit("/", 1)[-1]
    jsonschema.Draft7Validator(crd_schema(document["kind"], version)).validate(document)


# `dynamo.trtllm`'s parser imports TensorRT-LLM only to read four defaults off `BuildConfig`;
# TensorRT-LLM needs CUDA and cannot be installed here, so a stand-in module provides exactly
# those four defaults and nothing else, and the real `dynamo.trtllm.args.parse_args`
# (argparse groups, validation, endpoint derivation) runs.
@pytest.fixture
def trtllm_parse_args(monkeypatch):
    build_config_defaults = {"max_batch_size": 2048, "max_num_tokens": 8192,
                             "max_seq_len": None, "max_beam_width": 1}

    class BuildConfig:
        model_fields = {k: types.SimpleNamespace(default=v)
                        for k, v in build_config_defaults.items()}

    package = types.ModuleType("tensorrt_llm")
    llmapi = types.ModuleType("tensorrt_llm.llmapi")
    llmapi.BuildConfig = BuildConfig
    package.llmapi = llmapi
    monkeypatch.setitem(sys.modules, "tensorrt_llm", package)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", llmapi)
    for name in [m for m in sys.modules if m.startswith("dynamo.trtllm")]:
        monkeypatch.delitem(sys.modules, name)
    from dynamo.trtllm.args import parse_args

    return parse_args
