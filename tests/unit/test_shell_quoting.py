"""Every topology string that reaches a generated script stays text: `$(...)`, backticks,
quotes and newlines put in any string field the schema accepts are never executed by the
hosts or Slurm scripts, whether bash only parses them or really runs their lines."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from conftest import GRAPHS
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.placements.slurm.sbatch import render_sbatch_script
from dis_serve.topology import Topology

# Each payload, with {mark} replaced by a file name, runs `touch {mark}` if bash executes it.
PAYLOADS = {
    "command substitution": "x$(touch {mark})",
    "backticks": "x`touch {mark}`",
    "double quote": 'x"; touch {mark}; echo "',
    "single quote": "x'; touch {mark}; echo '",
    "newline": "x\ntouch {mark}",
}
HOSTS_EXTRAS = {
    "coordination": {"nats": {"auth": {"token_file": "/etc/dis-serve/nats-token"}}},
    "router": {"mode": "kv", "policy_config": "/etc/router.yaml"},
    "mocker": {"profile_data": "/data/profile.npz"},
}
SLURM_EXTRAS = HOSTS_EXTRAS | {"placement": {"slurm": {
    "partition": "gpu", "account": "proj", "time_limit": "00:30:00",
    "container_image": "nvcr.io/nvidia/dynamo:1.6.1", "container_mounts": ["/models:/models"],
    "interface": "ib0", "sbatch_extra": ["--exclusive"], "job_name": "serve"}}}


def _base(graph: str, extras: dict) -> dict:
    data = yaml.safe_load((GRAPHS / graph).read_text())
    for key, value in extras.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return Topology.model_validate(data).model_dump(mode="json", exclude_none=True)


def _string_leaves(node, path=()):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _string_leaves(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _string_leaves(value, (*path, index))
    elif isinstance(node, str):
        yield path


def _with(data: dict, path: tuple, value: str) -> dict:
    changed = copy.deepcopy(data)
    node = changed
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return changed


def _hostile(data: dict, payload: str) -> tuple[dict, dict[str, str]]:
    """`data` with the payload (its own mark per field) in every string field the schema
    accepts it in, and {mark: field} for those."""
    marks: dict[str, str] = {}
    hostile = data
    for index, path in enumerate(_string_leaves(data)):
        mark = f"pwned-{index}"
        candidate = _with(hostile, path, payload.format(mark=mark))
        try:
            Topology.model_validate(candidate)
        except ValidationError:
            continue  # refused by the schema: it never reaches a script
        hostile = candidate
        marks[mark] = ".".join(map(str, path))
    return hostile, marks


def _fake_bin(directory: Path) -> Path:
    """Every external command the scripts call, as a no-op (srun and scontrol answer like a
    two-node allocation), and a `touch` that makes its files, which is how a payload shows
    it ran."""
    bin_dir = directory / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "fake"
    fake.write_text("#!/bin/bash\n"
                    'case "${0##*/}" in\n'
                    '  touch) for f; do : > "$f"; done ;;\n'
                    "  scontrol) printf 'n0\\nn1\\n' ;;\n"
                    "  srun) echo 198.18.0.11 ;;\n"
                    "esac\n")
    fake.chmod(0o755)
    for name in ("touch", "srun", "scontrol", "sbatch", "ip", "awk", "getent", "hostname",
                 "curl", "seq", "sleep", "date", "mkdir", "rm", "cat", "dirname", "python3",
                 "python", "etcd", "nats-server", "env", "basename"):
        (bin_dir / name).symlink_to(fake)
    return bin_dir


def _run_each_line(script: str, cwd: Path) -> list[str]:
    """Run every line of the script on its own in one bash (lines that are only part of a
    construct fail to parse, harmlessly); external commands are the fakes. The marks a
    payload touched."""
    bin_dir = _fake_bin(cwd)
    driver = cwd / "driver.sh"
    driver.write_text("".join(f"( eval {_single_quoted(line)} ) </dev/null >/dev/null 2>&1\n"
                              for line in script.splitlines()))
    env = {"PATH": str(bin_dir), "HOME": str(cwd), "RUN_DIR": str(cwd), "LOGS": str(cwd),
           "HEAD_ADDRESS": "127.0.0.2", "NODE_ADDRESS": "127.0.0.3",
           "SLURM_JOB_NODELIST": "n[0-1]", "SLURM_SUBMIT_DIR": str(cwd)}
    subprocess.run(["/bin/bash", str(driver)], cwd=cwd, env=env, timeout=60,
                   capture_output=True)
    return sorted(p.name for p in cwd.rglob("pwned*"))


def _single_quoted(line: str) -> str:
    return "'" + line.replace("'", "'\\''") + "'"


def _scripts(target: str, topo: Topology) -> dict[str, str]:
    if target == "hosts":
        return {n: t for n, t in render_hosts_files(topo).items() if n.endswith(".sh")}
    return {"job.sbatch": render_sbatch_script(topo)}


TARGETS = {"hosts": ("demo-two-hosts.yaml", HOSTS_EXTRAS),
           "slurm": ("demo-slurm.yaml", SLURM_EXTRAS)}


@pytest.mark.parametrize("payload", PAYLOADS.values(), ids=PAYLOADS.keys())
@pytest.mark.parametrize("target", TARGETS)
def test_a_payload_in_any_string_field_is_never_executed(target, payload, tmp_path):
    graph, extras = TARGETS[target]
    data, marks = _hostile(_base(graph, extras), payload)
    assert marks, "some string field must accept the payload for this test to mean anything"
    scripts = _scripts(target, Topology.model_validate(data))
    for name, script in scripts.items():
        parsed = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
        assert parsed.returncode == 0, (name, parsed.stderr)
        work = tmp_path / name
        work.mkdir()
        touched = _run_each_line(script, work)
        assert touched == [], {name: [marks.get(m, m) for m in touched]}


def test_the_check_itself_catches_an_unquoted_payload(tmp_path):
    """The harness is not blind: a raw payload in an echo line is caught."""
    touched = _run_each_line('echo "interface ' + PAYLOADS["command substitution"].format(
        mark="pwned-0") + '"\n', tmp_path)
    assert touched == ["pwned-0"]


def test_the_slurm_interface_reaches_its_error_message_as_text(tmp_path):
    """The issue's case: `interface: "ib0$(touch /tmp/x)"` was pasted raw into an echo."""
    data = _base("demo-slurm.yaml", SLURM_EXTRAS)
    interface = f"ib0$(touch {tmp_path}/x)"
    data["placement"]["slurm"]["interface"] = interface
    script = render_sbatch_script(Topology.model_validate(data))
    line = next(line for line in script.splitlines() if "no cluster address" in line)
    ran = subprocess.run(["bash", "-c", line], cwd=tmp_path, capture_output=True, text=True,
                         env={"PATH": "/usr/bin:/bin"})
    assert ran.returncode == 1
    assert (f"no cluster address from interface {interface} (got []); "
            "set placement.slurm.interface") in ran.stderr
    assert not (tmp_path / "x").exists()


def test_fields_taking_payloads_cover_the_scripts_free_text(tmp_path):
    """The payload walk reaches the fields people write free text in (else it proves
    little): the served name and the token file at least."""
    _, marks = _hostile(_base(*TARGETS["slurm"]), PAYLOADS["command substitution"])
    assert {"model.served_name", "coordination.nats.auth.token_file"} <= set(marks.values())
    assert os.path.exists("/bin/bash")
