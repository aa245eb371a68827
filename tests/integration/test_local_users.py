"""What a local graph promises the other users of its machine (docs/security.md), checked as
one of them (`nobody`) against a default demo graph: its loopback endpoint and every
process's metrics and health answer them (plain HTTP, no credentials: that is the promise's
limit), and the run directory (logs with prompts, state, the graph's keys and client
certificate, without which etcd, NATS, the workers' request ports and an mTLS frontend
refuse them: test_security_local.py, test_frontend_tls_local.py) is closed to them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from dis_serve.launch.graph import start_graph
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE = 18020

# Run as the other user: what it reaches with nothing but the graph's addresses.
AS_ANOTHER_USER = """
import json, sys, httpx
endpoint, model, metrics, run_dir = sys.argv[1:5]
out = {}
chat = httpx.post(f"{endpoint}/v1/chat/completions", timeout=30, trust_env=False, json={
    "model": model, "max_tokens": 4, "messages": [{"role": "user", "content": "w3 w4"}]})
out["chat"] = chat.status_code
out["metrics"] = httpx.get(metrics, timeout=10, trust_env=False).status_code
for name, path in (("run_dir", run_dir), ("client_key", run_dir + "/tls/client-key.pem"),
                   ("state", run_dir + "/state.json")):
    try:
        open(path).close() if name != "run_dir" else __import__("os").listdir(path)
        out[name] = "readable"
    except PermissionError:
        out[name] = "denied"
print(json.dumps(out))
"""


@pytest.fixture
def open_parent():
    """A directory every user may enter (/tmp's own mode), so that only the run directory's
    own mode keeps others out."""
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root (CI runs as root)")
    path = Path(tempfile.mkdtemp(prefix="dis-serve-users-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_another_local_user_reaches_the_endpoint_and_metrics_but_not_the_run_directory(
        open_parent):
    topo = Topology.model_validate(relocated_demo("it-users", BASE))
    with start_graph(topo, run_root=open_parent / "home") as graph:
        worker = next(p for p in graph.plan.processes if p.role is not None)
        metrics = f"http://127.0.0.1:{worker.ports['system']}/metrics"
        seen = subprocess.run(
            [sys.executable, "-c", AS_ANOTHER_USER, graph.endpoint, graph.model_name,
             metrics, str(graph.run_dir)],
            user="nobody", group="nogroup", extra_groups=[], capture_output=True, text=True,
            timeout=60, check=False, cwd="/", env={"PATH": os.environ["PATH"]})
        assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout) == {"chat": 200, "metrics": 200, "run_dir": "denied",
                                       "client_key": "denied", "state": "denied"}
