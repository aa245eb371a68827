"""`render` into a directory it rendered before removes what it wrote there last time and no
longer writes, and nothing else: not the user's files, not another placement's directory,
not what its list names outside the directory."""

from __future__ import annotations

import json

import yaml

from conftest import GRAPHS
from dis_serve.placements.rendered_manifest import MANIFEST_FILE


def _two_node_topology(tmp_path):
    """demo-3node-slurm with its third node (the second decode worker) dropped."""
    data = yaml.safe_load((GRAPHS / "demo-3node-slurm.yaml").read_text())
    data["hardware"]["nodes"] = 2
    data["pools"]["decode"]["workers"] = 1
    path = tmp_path / "two-nodes.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _hosts_scripts(out):
    return sorted(p.name for p in (out / "hosts").glob("node-*.sh"))


def test_a_render_after_a_node_is_dropped_removes_that_nodes_script_and_says_so(
        run_cli, tmp_path):
    out = tmp_path / "out"
    assert run_cli("render", GRAPHS / "demo-3node-slurm.yaml", "--target", "hosts",
                   "--out", out).exit_code == 0
    assert _hosts_scripts(out) == ["node-node0.sh", "node-node1.sh", "node-node2.sh"]
    result = run_cli("render", _two_node_topology(tmp_path), "--target", "hosts", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert _hosts_scripts(out) == ["node-node0.sh", "node-node1.sh"]
    assert f"removed {out / 'hosts' / 'node-node2.sh'} (no longer rendered)" in result.stdout
    listed = json.loads((out / MANIFEST_FILE).read_text())["hosts"]
    assert "node-node1.sh" in listed and "node-node2.sh" not in listed


def test_files_render_did_not_write_stay(run_cli, tmp_path):
    out = tmp_path / "out"
    graph = GRAPHS / "demo-3node-slurm.yaml"
    assert run_cli("render", graph, "--target", "hosts", "--out", out).exit_code == 0
    mine = out / "hosts" / "my-notes.txt"
    mine.write_text("keep me\n")
    ca = sorted(p.relative_to(out) for p in (out / "hosts").rglob("*") if "tls" in p.parts)
    assert run_cli("render", _two_node_topology(tmp_path), "--target", "hosts",
                   "--out", out).exit_code == 0
    assert mine.read_text() == "keep me\n"
    assert sorted(p.relative_to(out) for p in (out / "hosts").rglob("*")
                  if "tls" in p.parts) == ca


def test_rendering_one_placement_leaves_another_placements_directory_as_it_was(
        run_cli, tmp_path):
    out = tmp_path / "out"
    graph = GRAPHS / "demo-3node-slurm.yaml"
    assert run_cli("render", graph, "--target", "hosts", "--out", out).exit_code == 0
    before = sorted((out / "hosts").rglob("*"))
    result = run_cli("render", _two_node_topology(tmp_path), "--target", "slurm", "--out", out)
    assert result.exit_code == 0, result.stderr
    assert sorted((out / "hosts").rglob("*")) == before
    assert "removed" not in result.stdout
    assert sorted(json.loads((out / MANIFEST_FILE).read_text())) == ["hosts", "slurm"]


def test_a_list_naming_paths_outside_its_directory_removes_nothing_there(run_cli, tmp_path):
    out = tmp_path / "out"
    graph = GRAPHS / "demo-3node-slurm.yaml"
    assert run_cli("render", graph, "--target", "hosts", "--out", out).exit_code == 0
    outside = tmp_path / "outside.txt"
    outside.write_text("not render's\n")
    (out / "hosts" / MANIFEST_FILE).write_text(json.dumps(
        ["../../outside.txt", str(outside), "node-node0.sh"]))
    assert run_cli("render", graph, "--target", "hosts", "--out", out).exit_code == 0
    assert outside.read_text() == "not render's\n"
    assert (out / "hosts" / "node-node0.sh").is_file()
