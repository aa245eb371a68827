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
import tempfile
from pathlib import Path

import pytest

from dis_serve.launch.graph import start_graph
from dis_serve.topology import Topology
from relocate import relocated_demo

pytestmark = pytest.mark.integration
BASE = 18020

# Run as the other user (its own shell and curl: the test's interpreter lives under /root):
# what it reaches with nothing but the graph's addresses.
AS_ANOTHER_USER = r"""
endpoint=$1 chat_body=$2 metrics=$3 run=$4
code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
chat=$(code -X POST -H 'Content-Type: application/json' -d "$chat_body" \
  "$endpoint/v1/chat/completions")
readable() { if $1 "$2" >/dev/null 2>&1; then echo readable; else echo denied; fi; }
printf '{"chat": %s, "metrics": %s, "run_dir": "%s", "client_key": "%s", "state": "%s"}\n' \
  "$chat" "$(code "$metrics")" "$(readable ls "$run")" \
  "$(readable cat "$run/tls/client-key.pem")" "$(readable cat "$run/state.json")"
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
            ["bash", "-c", AS_ANOTHER_USER, "as-another-user", graph.endpoint,
             json.dumps({"model": graph.model_name, "max_tokens": 4,
                         "messages": [{"role": "user", "content": "w3 w4"}]}),
             metrics, str(graph.run_dir)],
            user="nobody", group="nogroup", extra_groups=[], capture_output=True, text=True,
            timeout=60, check=False, cwd="/", env={"PATH": os.environ["PATH"]})
        assert seen.returncode == 0, seen.stderr
    assert json.loads(seen.stdout) == {"chat": 200, "metrics": 200, "run_dir": "denied",
                                       "client_key": "denied", "state": "denied"}
