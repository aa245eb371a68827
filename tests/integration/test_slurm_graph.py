"""`dis-serve up` with placement slurm on a real single-node Slurm cluster (slurmctld, slurmd
and munged started for this module, stopped by pid): sbatch, srun steps, squeue, scancel."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
import yaml

from conftest import GRAPHS, wait_until
from dis_serve.launch.rundir import RunDir
from dis_serve.placements.slurm.queue import SlurmJob, read_job
from relocate import relocate
from slurm_cluster import SlurmCluster, SlurmNode, short_hostname, slurm_conf, unavailable_reason

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE = 18400


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"no Slurm cluster: {reason}")
    cluster = SlurmCluster.start(tmp_path_factory.mktemp("slurm"))
    yield cluster
    cluster.stop()
    assert not [pid for pid in cluster.pids().values() if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


def _topology(tmp_path: Path, name: str, base: int) -> Path:
    """The demo-slurm graph on its own ports, its processes on this machine's loopback
    interface whatever the host name resolves to."""
    data = relocate(yaml.safe_load((GRAPHS / "demo-slurm.yaml").read_text()), name, base)
    data["placement"]["slurm"]["interface"] = "lo"
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _cli(slurm: SlurmCluster, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([DIS_SERVE, *args], capture_output=True, text=True, timeout=180,
                          env=slurm.env | {"DIS_SERVE_HOME": str(home)}, check=False)


def _job_processes(job_id: str, run_dir: Path) -> list[str]:
    """Live processes of the job: its slurmstepd daemons and anything naming the run dir."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
            continue
        line = " ".join(proc.info["cmdline"] or [])
        if f"slurmstepd: [{job_id}" in line or str(run_dir) in line:
            found.append(line)
    return found


def test_the_demo_graph_as_a_slurm_job_serves_and_down_cancels_it(slurm, tmp_path):
    home = tmp_path / "home"
    topology = _topology(tmp_path, "it-slurm", BASE)

    # No --timeout: up on Slurm waits the workers' startup budget (the mocker's 120 s).
    up = _cli(slurm, home, "up", str(topology), "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    run = RunDir.for_graph("it-slurm", home)
    job = read_job(run)
    assert job is not None and f"submitted Slurm job {job.job_id}" in up.stdout
    # placement slurm: HTTPS by default, checked against the graph's CA
    endpoint = f"https://127.0.0.1:{BASE}"
    ca = ssl.create_default_context(cafile=run.path / "tls" / "ca.pem")
    assert "ready in" in up.stdout and endpoint in up.stdout
    # The job writes it once its own checks pass, which may be a moment after `up` saw ready.
    endpoint_file = run.path / "endpoint"
    assert wait_until(endpoint_file.is_file, timeout=10)
    assert endpoint_file.read_text().strip() == endpoint
    try:
        chat = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                          verify=ca, json={"model": "demo-model", "max_tokens": 8,
                                           "messages": [{"role": "user", "content": "w3 w4 w5"}]})
        assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 8
        with httpx.stream("POST", f"{endpoint}/v1/completions", trust_env=False, timeout=30,
                          verify=ca, json={"model": "demo-model", "prompt": "w7 w8",
                                           "max_tokens": 5, "stream": True}) as response:
            assert response.status_code == 200
            chunks = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        assert chunks[-1] == "[DONE]"
        assert len([c for c in chunks[:-1] if json.loads(c)["choices"][0]["text"]]) == 5

        status = _cli(slurm, home, "status", "it-slurm")
        assert status.returncode == 0 and f"Slurm job {job.job_id}, RUNNING" in status.stdout
        assert "router: prefill 1/1, decode 1/1" in status.stdout
        logs = _cli(slurm, home, "logs", "frontend", "--name", "it-slurm", "-n", "3")
        assert logs.returncode == 0 and logs.stdout.strip()
        assert _job_processes(job.job_id, run.path)
    finally:
        down = _cli(slurm, home, "down", "it-slurm")
    assert down.returncode == 0, down.stderr
    assert f"stopped it-slurm (scancel {job.job_id}" in down.stdout
    assert job.job_id not in slurm.jobs()
    assert _job_processes(job.job_id, run.path) == []


def test_a_second_up_of_a_running_slurm_graph_is_refused(slurm, tmp_path):
    home = tmp_path / "home"
    topology = _topology(tmp_path, "it-slurm2", BASE + 50)
    first = _cli(slurm, home, "up", str(topology), "--detach")
    assert first.returncode == 0, first.stdout + first.stderr
    try:
        second = _cli(slurm, home, "up", str(topology), "--detach")
        assert second.returncode == 2
        assert "already running as Slurm job" in second.stderr
    finally:
        assert _cli(slurm, home, "down", "it-slurm2").returncode == 0


def test_fault_on_a_slurm_graph_whose_cluster_is_gone_says_not_running_in_one_line(tmp_path):
    """The graph's job record is there, the cluster's controller is not (nothing listens
    at its port): `fault` asks squeue, not srun, and says so in one line."""
    if shutil.which("squeue") is None:
        pytest.skip("Slurm's client commands are not installed")
    root = tmp_path / "gone-cluster"
    root.mkdir()
    conf = root / "slurm.conf"
    # squeue retries an unreachable controller for MessageTimeout (10 s by default).
    conf.write_text(slurm_conf(root, controller_address="127.0.0.1",
                               nodes=[SlurmNode(short_hostname(), "127.0.0.1")],
                               ctld_port=BASE + 98, slurmd_port=BASE + 99, bind_any=False)
                    + "MessageTimeout=1\n")
    home = tmp_path / "home"
    run = RunDir.for_graph("it-slurm-gone", home)
    run.prepare()
    job = SlurmJob(name=run.name, job_id="4242", run_dir=str(run.path), model_name="demo-model",
                   submitted_at=time.time(), processes=["etcd", "nats", "frontend"])
    run.slurm_job_file.write_text(job.model_dump_json())

    fault = subprocess.run([DIS_SERVE, "fault", run.name, "--process", "frontend"],
                           capture_output=True, text=True, timeout=60, check=False,
                           env=os.environ | {"DIS_SERVE_HOME": str(home),
                                             "SLURM_CONF": str(conf)})
    assert fault.returncode == 1, fault
    lines = [line for line in fault.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "srun" not in fault.stderr, fault.stderr
    assert "it-slurm-gone is not running: Slurm job 4242 is not in the queue" in lines[0]
