"""The hosts and Slurm targets: every process on its node, reaching the head, never loopback."""

from __future__ import annotations

import copy
import re

from conftest import GRAPHS, single_head
from dis_serve.inputs.yaml_input import load_model_file
from dis_serve.placements.hosts.scripts import render_hosts_files
from dis_serve.placements.slurm.sbatch import render_sbatch_script, render_slurm_plan
from dis_serve.render.cluster_plan import (
    DATA_DIR_VAR,
    ClusterContext,
    ClusterPlan,
    render_cluster_plan,
    resolved_launch_plan,
)
from dis_serve.render.shell_words import runtime, word
from dis_serve.topology import ProcessKind, Topology

DISAGG_70B = load_model_file(Topology, GRAPHS / "llama70b-h100-disagg.yaml")
TWO_HOSTS = load_model_file(Topology, GRAPHS / "demo-two-hosts.yaml")
LOOPBACK = re.compile(r"\b127\.\d+\.\d+\.\d+|localhost")


def _with(topo: Topology, **changes) -> Topology:
    data = copy.deepcopy(topo.model_dump(mode="json", exclude_unset=True)) | changes
    return Topology.model_validate(data)


def _lines(script: str, marker: str) -> list[str]:
    return [line for line in script.splitlines() if marker in line]


def test_no_process_of_the_70b_graph_points_at_loopback_in_slurm_or_hosts_scripts():
    scripts = [render_sbatch_script(DISAGG_70B), *render_hosts_files(DISAGG_70B).values()]
    for script in scripts:
        for line in _lines(script, "dynamo.") + _lines(script, "etcd --") \
                + _lines(script, "nats-server"):
            assert not LOOPBACK.search(line), line
    # The Slurm job's processes live in the plan its agents run.
    for node in render_slurm_plan(DISAGG_70B).nodes:
        for spec in node.processes:
            for value in [*spec.argv, *spec.env.values()]:
                assert not LOOPBACK.search(value), (spec.name, value)


def _spec(plan, name: str):
    return next(p for node in plan.nodes for p in node.processes if p.name == name)


def test_each_slurm_worker_runs_on_its_node_and_finds_etcd_and_nats_on_the_head():
    plan = render_slurm_plan(DISAGG_70B)
    assert [p.name for p in plan.nodes[5].processes] == ["decode-8", "decode-9"]
    decode_9 = _spec(plan, "decode-9")
    assert decode_9.env["DYN_TCP_RPC_HOST"] == runtime("NODE_ADDR_5")
    assert decode_9.env["ETCD_ENDPOINTS"] == f"https://{runtime('NODE_ADDR_0')}:2379"
    assert decode_9.env["NATS_SERVER"] == f"tls://{runtime('NODE_ADDR_0')}:4222"
    agent = _lines(render_sbatch_script(DISAGG_70B), "--job-name=agent-node5 ")[0]
    assert '--nodelist="${NODES[5]}"' in agent
    assert agent.endswith(' -m dis_serve agent --node node5 "$RUN_DIR" &')


def test_the_sbatch_script_starts_one_agent_per_node_and_no_process_itself():
    script = render_sbatch_script(DISAGG_70B)
    agents = _lines(script, " -m dis_serve agent ")
    assert len(agents) == 6 and all("--overlap" in line for line in agents)
    # Only comments name the worker lines the agents run (placements/slurm/mpi_launch.py).
    commands = [line for line in script.splitlines() if not line.startswith("#")]
    assert not _lines("\n".join(commands), "dynamo.") and not _lines(script, "etcd --")
    assert "wait -n" not in script and "curl" not in script


def test_slurm_workers_share_the_nodes_cpus_and_pin_their_own_gpus():
    plan = render_slurm_plan(DISAGG_70B)
    assert _spec(plan, "decode-1").env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    script = render_sbatch_script(DISAGG_70B)
    # The head node runs prefill workers: its agent step sees the node's GPUs.
    assert "--gres=none" not in _lines(script, "--job-name=agent-node0 ")[0]
    assert "#SBATCH --gpus-per-node=8" in script and "#SBATCH --nodes=6" in script


def test_hosts_files_carry_the_plan_each_node_agent_runs():
    files = render_hosts_files(TWO_HOSTS)
    assert sorted(files) == ["README.md", "cluster-plan.json", "node-head.sh",
                             "node-workers.sh", "topology.json"]
    plan = ClusterPlan.model_validate_json(files["cluster-plan.json"])
    decode = _spec(plan, "decode-0")
    assert decode.env["DYN_TCP_RPC_HOST"] == "127.0.0.3"
    assert decode.env["ETCD_ENDPOINTS"].startswith("https://127.0.0.2:")
    assert Topology.model_validate_json(files["topology.json"]).name == TWO_HOSTS.name
    trtllm = ClusterPlan.model_validate_json(render_hosts_files(DISAGG_70B)["cluster-plan.json"])
    assert _spec(trtllm, "decode-1").env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_a_hosts_node_script_only_hands_over_to_its_agent():
    workers = render_hosts_files(TWO_HOSTS)["node-workers.sh"]
    assert workers.rstrip().endswith('exec python3 -m dis_serve agent --node workers "$RUN_DIR"')
    assert "dynamo." not in workers and "wait -n" not in workers and "curl" not in workers


def test_the_readme_lists_the_head_node_first():
    readme = render_hosts_files(TWO_HOSTS)["README.md"]
    assert readme.index("node-head.sh") < readme.index("node-workers.sh")


def test_with_a_container_image_each_trtllm_worker_is_an_mpi_step_in_it_and_agents_are_not():
    topo = _with(DISAGG_70B, placement={"slurm": {
        "container_image": "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1",
        "container_mounts": ["/scratch:/scratch"]}})
    plan = render_slurm_plan(topo)
    mounts = (f"--container-mounts=/scratch:/scratch,{runtime('RUN_DIR')}:{runtime('RUN_DIR')},"
              f"{topo.model.path}:{topo.model.path}")
    workers = [p for n in plan.nodes for p in n.processes if p.kind is ProcessKind.WORKER]
    assert len(workers) == 12
    for spec in workers:
        assert spec.argv[:2] == ["srun", "--overlap"] and "--mpi=pmix" in spec.argv
        assert f"--nodelist={runtime(f'NODE_{spec.node}')}" in spec.argv
        # The .sqsh the job imports from it once (placements/slurm/mpi_launch.py).
        assert (f"--container-image={runtime('RUN_DIR')}/images/"
                "nvcr.io+nvidia+ai-dynamo+tensorrtllm-runtime+1.6.1.sqsh") in spec.argv
        assert mounts in spec.argv and "--no-container-entrypoint" in spec.argv
    # An srun cannot start from inside a pyxis container: the agents run on the nodes.
    agents = _lines(render_sbatch_script(topo), " -m dis_serve agent ")
    assert len(agents) == 6 and not any("--container" in line for line in agents)


def test_sbatch_options_come_from_the_placement():
    topo = _with(DISAGG_70B, placement={"slurm": {
        "partition": "h100", "account": "infer", "time_limit": "1-00:00:00",
        "container_image": "none", "sbatch_extra": ["--qos=high", "--exclusive"]}})
    script = render_sbatch_script(topo)
    for line in ("#SBATCH --partition=h100", "#SBATCH --account=infer",
                 "#SBATCH --time=1-00:00:00", "#SBATCH --qos=high"):
        assert line in script.splitlines()
    assert script.count("#SBATCH --exclusive") == 1


def test_a_nats_token_is_read_at_run_time_and_never_written_into_a_script():
    topo = Topology.model_validate(single_head(
        TWO_HOSTS.model_dump(mode="json", exclude_unset=True)
        | {"coordination": {"nats": {"auth": {"token_env": "GRAPH_NATS_TOKEN"}}}}))
    head = render_hosts_files(topo)["node-head.sh"]
    assert 'NATS_AUTH_TOKEN="${GRAPH_NATS_TOKEN:?set GRAPH_NATS_TOKEN to the NATS token}"' \
        in head
    assert "NATS_AUTH_TOKEN }" not in head  # the head's agent writes nats.conf
    nats = _spec(ClusterPlan.model_validate_json(render_hosts_files(topo)["cluster-plan.json"]),
                 "nats")
    assert nats.argv[1:5] == ["-c", f"{runtime('RUN_DIR')}/nats.conf", "-a", "127.0.0.2"]


def test_every_value_is_quoted_and_run_time_variables_expand():
    assert word("/models/my model") == "'/models/my model'"
    assert word(f"http://{runtime('HEAD')}:2379") == "http://\"${HEAD}\":2379"
    assert word(f"$(rm -rf /){runtime('X')}") == "'$(rm -rf /)'\"${X}\""


def test_the_plan_a_job_ran_resolves_to_probeable_addresses(tmp_path):
    plan = render_slurm_plan(DISAGG_70B, run_dir=str(tmp_path))
    addresses = {f"NODE_ADDR_{i}": f"10.0.0.{i + 1}" for i in range(6)}
    launch = resolved_launch_plan(plan, addresses, tmp_path)
    assert launch.endpoint == "http://10.0.0.1:8000"
    assert launch.process("decode-9").readiness.url == "http://10.0.0.6:9111/health"
    assert launch.process("nats").readiness.host == "10.0.0.1"


def test_system_ports_follow_pool_order_as_in_the_local_plan():
    plan = render_cluster_plan(DISAGG_70B, ClusterContext(
        run_dir="/run", node_addresses=[f"10.0.0.{i}" for i in range(6)]))
    workers = [p for n in plan.nodes for p in n.processes if p.kind is ProcessKind.WORKER]
    assert [p.ports["system"] for p in workers] == list(range(9100, 9112))



def test_the_batch_script_asks_the_agents_to_stop_through_the_run_directory_not_a_signal():
    script = render_sbatch_script(load_model_file(Topology, GRAPHS / "demo-3node-slurm.yaml"))
    trap = next(line for line in script.splitlines() if line.startswith("stop_agents()"))
    assert 'touch "$RUN_DIR/stop-request"' in trap
    assert "kill" not in trap and "scancel" not in trap
    assert '"$RUN_DIR/stop-request"' in next(line for line in script.splitlines()
                                             if line.startswith('mkdir -p "$LOGS"; rm -f'))


def test_the_time_limit_reaches_the_batch_shell_alone_a_minute_early_so_the_stop_is_ordered():
    topo = load_model_file(Topology, GRAPHS / "demo-3node-slurm.yaml")
    assert "#SBATCH --signal=B:TERM@60" in render_sbatch_script(topo).splitlines()
    data = topo.model_dump(mode="json")
    data["placement"]["slurm"]["sbatch_extra"] = ["--signal=B:USR1@120"]
    script = render_sbatch_script(Topology.model_validate(data))
    assert [line for line in script.splitlines() if line.startswith("#SBATCH --signal")] == [
        "#SBATCH --signal=B:USR1@120"]


def test_etcd_and_nats_data_go_to_the_agents_data_directory_which_no_node_script_asks_for():
    files = render_hosts_files(TWO_HOSTS)
    plan = ClusterPlan.model_validate_json(files["cluster-plan.json"])
    etcd = next(p for p in plan.head.processes if p.kind is ProcessKind.ETCD)
    assert etcd.argv[etcd.argv.index("--data-dir") + 1] == runtime(DATA_DIR_VAR) + "/etcd-data"
    assert not any(DATA_DIR_VAR in text for name, text in files.items() if name.endswith(".sh"))
