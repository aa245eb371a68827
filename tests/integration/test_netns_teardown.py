"""The multi-node test bed leaves nothing behind: not after its own teardown, and not after
a run killed before it (the next run removes what that left, by our own name prefixes)."""

from __future__ import annotations

import subprocess
import sys

import psutil
import pytest

from conftest import require_netns, wait_until
from netns_cluster import BRIDGE_PREFIX, NetnsCluster, in_namespace, ip, leftovers, remove_stale

pytestmark = pytest.mark.integration


def test_teardown_stops_jobs_daemons_and_strays_and_deletes_every_namespace_and_link(
        tmp_path):
    require_netns()
    cluster = NetnsCluster.start(tmp_path / "slurm", nodes=2)
    try:
        job = subprocess.run(["sbatch", "--parsable", "--nodes=2", "--output=/dev/null",
                              "--wrap", "srun --nodes=2 --ntasks-per-node=1 sleep 300"],
                             env=cluster.env, capture_output=True, text=True, check=True)
        job_id = job.stdout.strip()
        stray = cluster.popen_in("n2", ["sleep", "300"])
        steps = lambda: [p for n in ("n1", "n2") for p in cluster.processes_in(n)  # noqa: E731
                         if psutil.Process(p).name() == "sleep"]
        assert wait_until(lambda: len(steps()) == 3, timeout=30), steps()
        in_namespaces = steps()
        daemons = cluster.pids()
        assert set(daemons) == {"munged", "slurmctld", "slurmd-n1", "slurmd-n2"}
    finally:
        cluster.stop()
    assert stray.wait(timeout=10) is not None
    assert not [p for p in [*in_namespaces, *daemons.values()] if psutil.pid_exists(p)
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    assert leftovers(cluster.tag) == []
    assert cluster.tag not in ip("netns", "list") + ip("-o", "link", "show")
    assert job_id


def test_what_a_killed_run_left_is_removed_by_the_next_run(tmp_path):
    require_netns()
    # A pid that no longer runs stands for the killed run that made these names.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    tag = f"{dead.pid}a"
    namespace, veth, bridge = f"dsn{tag}-1", f"dsv{tag}-1", f"{BRIDGE_PREFIX}{tag}"
    ip("link", "add", bridge, "type", "bridge")
    ip("netns", "add", namespace)
    ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", namespace)
    ip("link", "set", veth, "master", bridge)
    left_running = subprocess.Popen(in_namespace(namespace, "sleep", "300"))
    try:
        assert sorted(leftovers(tag)) == sorted([namespace, veth, bridge])
        removed = remove_stale()
        assert {namespace, bridge} <= set(removed)
        assert leftovers(tag) == []
        assert left_running.wait(timeout=10) is not None
    finally:
        left_running.kill()
        subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        subprocess.run(["ip", "link", "del", bridge], capture_output=True, check=False)
