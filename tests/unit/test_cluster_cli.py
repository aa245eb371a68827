"""The CLI with placements: validate shows the nodes, render writes each target, up refuses
what it cannot start here."""

from __future__ import annotations

import stat

from conftest import GRAPHS, assert_one_line_error


def test_validate_shows_which_processes_land_on_which_node(run_cli):
    # Each node runs a frontend replica with its balancer and a NATS member (issue 29: a
    # two-node graph survives either frontend's node); etcd stays one, on the head.
    result = run_cli("validate", GRAPHS / "demo-two-hosts.yaml")
    assert result.exit_code == 0, result.stderr
    head = next(line for line in result.stdout.splitlines() if "head (head)" in line)
    workers = next(line for line in result.stdout.splitlines() if "127.0.0.3" in line)
    assert "etcd, nats-0, frontend-0, balancer-0" in head
    assert "nats-1, frontend-1, balancer-1, prefill-0," in workers


def test_validate_warns_about_kv_crossing_nodes_over_tcp(run_cli, tmp_path):
    text = (GRAPHS / "llama70b-h100-disagg.yaml").read_text() + "placement:\n  slurm: {}\n"
    path = tmp_path / "t.yaml"
    path.write_text(text)
    result = run_cli("validate", path)
    assert result.exit_code == 0, result.stderr
    assert "warning: prefill (nodes node0) and decode (nodes node1, node2" in result.stdout
    assert "480 MiB of KV cache" in result.stdout


def test_render_hosts_writes_a_script_per_node_and_the_readme(run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "demo-two-hosts.yaml", "--target", "hosts",
                     "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    written = sorted(p.name for p in (tmp_path / "hosts").iterdir())
    assert written == ["README.md", "cluster-plan.json", "node-head.sh", "node-workers.sh",
                       "observability", "tls", "topology.json"]
    assert (tmp_path / "hosts" / "node-head.sh").stat().st_mode & 0o111
    assert "follow its README.md" in result.stdout


def test_render_of_a_cluster_target_makes_the_graphs_ca_for_the_agents_keys_0600(
        run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "demo-3node-slurm.yaml", "--target", "all",
                     "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    for target in ("hosts", "slurm"):
        tls = tmp_path / target / "tls"
        assert sorted(p.name for p in tls.iterdir()) == [
            "ca-key.pem", "ca.pem", "client-key.pem", "client.pem", "nats-token"]
        assert stat.S_IMODE(tls.stat().st_mode) == 0o700
        assert {stat.S_IMODE(p.stat().st_mode) for p in tls.iterdir()} == {0o600}
    # One CA per rendered directory: nodes that share no storage each get a copy of one.
    assert (tmp_path / "hosts/tls/ca.pem").read_bytes() != \
        (tmp_path / "slurm/tls/ca.pem").read_bytes()
    for script in (tmp_path / "slurm/job.sbatch", *(tmp_path / "hosts").glob("*.sh")):
        assert "PRIVATE KEY" not in script.read_text()


def test_render_slurm_of_a_graph_without_placement_uses_slurm_defaults(run_cli, tmp_path):
    result = run_cli("render", GRAPHS / "llama70b-h100-disagg.yaml", "--target", "slurm",
                     "--out", tmp_path)
    assert result.exit_code == 0, result.stderr
    script = (tmp_path / "slurm" / "job.sbatch").read_text()
    assert "#SBATCH --nodes=6" in script and "#SBATCH --time=04:00:00" in script
    assert ("import-image \"${RUN_DIR}\"/images/nvcr.io+nvidia+ai-dynamo+tensorrtllm-runtime"
            "+1.6.1.sqsh 'nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1'") in script
    assert ('--container-image="${RUN_DIR}"/images/nvcr.io+nvidia+ai-dynamo+'
            'tensorrtllm-runtime+1.6.1.sqsh') in script
    assert (tmp_path / "slurm" / "engine-configs" / "decode.yaml").is_file()


def test_up_of_a_hosts_placement_prepares_says_what_to_run_and_waits_for_the_nodes(
        run_cli, tmp_path, monkeypatch):
    monkeypatch.setenv("DIS_SERVE_HOME", str(tmp_path))
    result = run_cli("up", GRAPHS / "demo-two-hosts.yaml", "--detach", "--timeout", "1")
    run = tmp_path / "runs" / "demo-two-hosts"
    assert f"2. on head (127.0.0.2): {run}/node-head.sh" in result.stdout
    assert (run / "node-workers.sh").is_file() and (run / "model-card" / "config.json").is_file()
    # Nobody started the node scripts: one line saying where to look, exit 1.
    assert_one_line_error(result, "not ready after 1 s; are the node scripts running?",
                          code=1)


def test_a_trtllm_graph_placed_on_slurm_without_an_image_names_the_key_and_nvidias_image(
        run_cli, tmp_path):
    text = (GRAPHS / "llama70b-h100-disagg.yaml").read_text() + "placement:\n  slurm: {}\n"
    path = tmp_path / "t.yaml"
    path.write_text(text)
    result = run_cli("render", path, "--target", "slurm", "--out", tmp_path / "out")
    assert_one_line_error(result, "placement.slurm.container_image",
                          "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1")
