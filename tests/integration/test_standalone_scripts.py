"""What `dis-serve render` writes for the cluster placements runs as written. The `slurm/`
directory runs by itself: `sbatch job.sbatch` in it,
on the multi-node test bed (tests/netns_cluster.py: three Slurm nodes, each its own network
namespace), starts graphs/demo-3node-slurm.yaml's graph from what that directory holds (its
agents read its cluster-plan.json and topology.json, its tls/) and serves chat completions
at the head node's address; `scancel --batch --signal=TERM` stops it, leaving no process of
it. The nodes get dis-serve from this virtual environment (its bin/ first on the job's
PATH, as a shared one is at a Slurm site); a job whose nodes' python3 lacks dis-serve ends
before any agent starts, with one line saying so, and so does a hosts node script on a
machine whose python3 has another dis-serve or none."""

from __future__ import annotations

import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import yaml

from conftest import GRAPHS, wait_until
from dis_serve import __version__
from netns_cluster import NetnsCluster
from relocate import relocate

pytestmark = pytest.mark.integration
DIS_SERVE = str(Path(sys.executable).parent / "dis-serve")
BASE = 18760
HEAD = "198.18.0.11"
NAME = "it-standalone"


def _rendered(tmp_path: Path) -> Path:
    data = relocate(yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text()), NAME, BASE)
    topology = tmp_path / f"{NAME}.yaml"
    topology.write_text(yaml.safe_dump(data))
    out = tmp_path / "rendered"
    subprocess.run([DIS_SERVE, "render", str(topology), "--target", "slurm", "--out", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    return out / "slurm"


def _sbatch(cluster: NetnsCluster, directory: Path, path: str) -> str:
    """`sbatch job.sbatch` in `directory`, with `path` as the job's PATH; the job id."""
    out = subprocess.run(["sbatch", "--parsable", "job.sbatch"], cwd=directory,
                         env=cluster.env | {"PATH": path}, capture_output=True, text=True,
                         timeout=30, check=False)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().split(";")[0]


def _in_queue(cluster: NetnsCluster, job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], env=cluster.env,
                         capture_output=True, text=True, check=False, timeout=30)
    return bool(out.stdout.strip())


def _chat(endpoint: str, directory: Path) -> int:
    reply = httpx.post(f"{endpoint}/v1/chat/completions", trust_env=False, timeout=30,
                       verify=ssl.create_default_context(cafile=directory / "tls" / "ca.pem"),
                       json={"model": "demo-model", "max_tokens": 8,
                             "messages": [{"role": "user", "content": "w3 w4 w5"}]})
    return reply.json()["usage"]["completion_tokens"] if reply.status_code == 200 else 0


def test_sbatch_of_the_rendered_directory_serves_and_scancel_stops_it(netns_cluster,
                                                                      tmp_path):
    directory = _rendered(tmp_path)
    venv_bin = str(Path(sys.executable).parent)
    start = time.monotonic()
    job = _sbatch(netns_cluster, directory, f"{venv_bin}:/usr/sbin:/usr/bin:/sbin:/bin")
    try:
        assert wait_until((directory / "endpoint").is_file, timeout=120), \
            (directory / f"slurm-{job}.out").read_text()
        endpoint = (directory / "endpoint").read_text().strip()
        assert endpoint == f"https://{HEAD}:{BASE}"
        assert wait_until(lambda: _chat(endpoint, directory) == 8, timeout=30)
        print(f"\nsbatch job.sbatch in {directory}: serving at {endpoint} after "
              f"{time.monotonic() - start:.1f} s")
    finally:
        subprocess.run(["scancel", "--batch", "--signal=TERM", job], env=netns_cluster.env,
                       check=False, timeout=30)
        assert wait_until(lambda: not _in_queue(netns_cluster, job), timeout=60)
    for node in ("n1", "n2", "n3"):
        assert wait_until(lambda n=node: not [
            pid for pid in netns_cluster.processes_in(n)
            if str(directory) in " ".join(_cmdline(pid))], timeout=15), node


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    except OSError:
        return []


def test_a_job_whose_nodes_lack_dis_serve_ends_in_one_line_before_any_agent(netns_cluster,
                                                                             tmp_path):
    directory = _rendered(tmp_path)
    job = _sbatch(netns_cluster, directory, "/usr/sbin:/usr/bin:/sbin:/bin")  # system python3
    assert wait_until(lambda: not _in_queue(netns_cluster, job), timeout=60)
    lines = (directory / f"slurm-{job}.out").read_text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"node n1: python3 has no dis-serve {__version__} (found: none)")
    assert not (directory / "logs" / "agent-node0.log").exists()


def test_a_hosts_node_script_stops_in_one_line_where_python3_lacks_this_dis_serve(tmp_path):
    out = tmp_path / "rendered"
    subprocess.run([DIS_SERVE, "render", str(GRAPHS / "demo-two-hosts.yaml"), "--target",
                    "hosts", "--out", str(out)], check=True, capture_output=True, timeout=120)
    other = tmp_path / "other-bin"
    other.mkdir()
    (other / "python3").write_text("#!/bin/sh\necho 0.0.1\n")  # another dis-serve's version
    (other / "python3").chmod(0o755)
    for path, found in (("/usr/sbin:/usr/bin:/sbin:/bin", "none"),
                        (f"{other}:/usr/bin:/bin", "0.0.1")):
        run = subprocess.run(["bash", str(out / "hosts" / "node-head.sh")], timeout=30,
                             env={"PATH": path}, capture_output=True, text=True, check=False)
        assert run.returncode == 1 and run.stdout == ""
        assert run.stderr.splitlines() == [
            f"node head: python3 has no dis-serve {__version__} (found: {found}); this script "
            f"was rendered by dis-serve {__version__}: install that version where the nodes "
            "run python3 (a virtual environment on storage every node mounts, or the nodes' "
            "own), or render it again with the one they have"]
