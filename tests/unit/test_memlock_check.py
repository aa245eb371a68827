"""The locked-memory check every target runs before a GPU worker starts (the hosts node
script, the Kubernetes worker's check-memlock init container), run by a real `sh` under the
limits and capabilities it is meant to judge: an unlimited limit or CAP_IPC_LOCK in effect
passes; a non-root user whose IPC_LOCK sits only in its inheritable set (what a pod's
`capabilities.add` gives a non-root user, kubernetes/kubernetes#56374) is stopped with one
line when RDMA needs it."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.render.shell_words import memlock_check
from dis_serve.topology import Topology

SETPRIV = shutil.which("setpriv")
pytestmark = pytest.mark.skipif(os.geteuid() != 0 or SETPRIV is None,
                                reason="needs root and setpriv to set limits and capabilities")
CHECK = memlock_check("node a", "raise it", fatal=True)
WARN = memlock_check("node a", "raise it", fatal=False)


def _run(check: str, *, limit_kib: int | None, as_user: list[str] = ()) -> tuple[int, str]:
    """`check` in `sh` with RLIMIT_MEMLOCK at `limit_kib` (None: unlimited), as `as_user`
    (setpriv options)."""
    limit = "unlimited" if limit_kib is None else str(limit_kib)
    argv = ["sh", "-c", f"ulimit -l {limit} && exec {SETPRIV} {' '.join(as_user)} sh -c "
            f"\"$0\"", check] if as_user else ["sh", "-c", f"ulimit -l {limit} && {check}"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    return result.returncode, result.stderr


NON_ROOT = ["--reuid=1000", "--regid=0", "--clear-groups"]


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_MEMLOCK)[1] != resource.RLIM_INFINITY,
                    reason="this machine's hard locked-memory limit is not unlimited")
def test_an_unlimited_limit_passes_for_anyone():
    assert _run(CHECK, limit_kib=None, as_user=NON_ROOT) == (0, "")


def test_root_with_cap_ipc_lock_passes_under_any_limit():
    assert _run(CHECK, limit_kib=64) == (0, "")


def test_a_non_root_user_with_ipc_lock_only_inheritable_is_stopped_in_one_line():
    code, stderr = _run(CHECK, limit_kib=64, as_user=[*NON_ROOT, "--inh-caps=+ipc_lock"])
    assert code == 1
    assert stderr.splitlines() == ["node a: locked memory is limited to 64 KiB and "
                                   "CAP_IPC_LOCK is not in effect; UCX/NIXL pin the KV-cache "
                                   "buffers they send: raise it"]


def test_an_ambient_ipc_lock_is_in_effect_and_passes():
    assert _run(CHECK, limit_kib=64, as_user=[
        *NON_ROOT, "--inh-caps=+ipc_lock", "--ambient-caps=+ipc_lock"]) == (0, "")


def test_without_rdma_it_warns_and_carries_on():
    code, stderr = _run(WARN, limit_kib=64, as_user=NON_ROOT)
    assert code == 0 and "locked memory is limited to 64 KiB" in stderr


def test_the_hosts_node_script_runs_the_same_check():
    data = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())
    data["placement"] = {"interconnect": "rdma", "hosts": {"nodes": [
        {"name": f"n{i}", "address": f"10.0.0.{i}", "gpus": 8} for i in range(6)]}}
    scripts = render_hosts_files(Topology.model_validate(data))
    worker_node = next(text for name, text in scripts.items()
                       if name.endswith(".sh") and "n1" in name)
    [line] = [line for line in worker_node.splitlines() if "ulimit -l" in line]
    assert line == memlock_check("node n1", "raise it (ulimit -l unlimited, or memlock in "
                                 "/etc/security/limits.conf)", fatal=True)
