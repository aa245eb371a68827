"""The hosts and Slurm targets: every process on its node, reaching the head, never loopback."""

from __future__ import annotations

import copy
import re

from conftest import GRAPHS
from dis_serve.render.cluster_plan import ClusterContext, render_cluster_plan, resolved_launch_plan
from dis_serve.render.hosts import render_hosts_files
from dis_serve.render.shell_words import runtime, word
from dis_serve.render.slurm import render_sbatch_script, render_slurm_plan
from dis_serve.topology import ProcessKind, Topology
from dis_serve.yaml_input import load_model_file

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


def test_each_slurm_worker_runs_on_its_node_and_finds_etcd_and_nats_on_the_head():
    script = render_sbatch_script(DISAGG_70B)
    decode_9 = _lines(script, "--job-name=decode-9 ")[0]
    assert '--nodelist="${NODE_5}"' in decode_9 and 'NODE_5="${NODES[5]}"' in script
    assert 'DYN_TCP_RPC_HOST="${NODE_ADDR_5}"' in decode_9
    assert 'ETCD_ENDPOINTS=http://"${NODE_ADDR_0}":2379' in decode_9
    assert 'NATS_SERVER=nats://"${NODE_ADDR_0}":4222' in decode_9


def test_slurm_workers_share_the_nodes_cpus_and_pin_their_own_gpus():
    script = render_sbatch_script(DISAGG_70B)
    decode_1 = _lines(script, "--job-name=decode-1 ")[0]
    assert "--overlap" in decode_1 and "--exact" not in decode_1
    assert "env CUDA_VISIBLE_DEVICES=4,5,6,7 " in decode_1
    frontend = _lines(script, "--job-name=frontend ")[0]
    assert "--overlap" in frontend and "--gres=none" in frontend
    assert "#SBATCH --gpus-per-node=8" in script and "#SBATCH --nodes=6" in script


def test_hosts_scripts_pin_gpus_per_worker_and_take_addresses_from_the_topology():
    files = render_hosts_files(TWO_HOSTS)
    assert sorted(files) == ["README.md", "node-head.sh", "node-workers.sh"]
    workers = files["node-workers.sh"]
    decode = _lines(workers, "--disaggregation-mode decode")[0]
    assert "DYN_TCP_RPC_HOST=127.0.0.3" in decode and "ETCD_ENDPOINTS=http://127.0.0.2:" in decode
    assert _lines(workers, "wait_ready etcd")  # workers wait for the head's etcd first
    trtllm = render_hosts_files(DISAGG_70B)["node-node1.sh"]
    decode_1 = _lines(trtllm, '>"$LOGS/decode-1.log"')[0]
    assert decode_1.startswith("env CUDA_VISIBLE_DEVICES=4,5,6,7 ")


def test_the_readme_lists_the_head_node_first():
    readme = render_hosts_files(TWO_HOSTS)["README.md"]
    assert readme.index("node-head.sh") < readme.index("node-workers.sh")


def test_a_container_image_gives_every_step_pyxis_flags_and_mounts_run_dir_and_checkpoint():
    topo = _with(DISAGG_70B, placement={"slurm": {
        "container_image": "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1",
        "container_mounts": ["/scratch:/scratch"]}})
    steps = [s for s in _lines(render_sbatch_script(topo), "--job-name=")
             if s.startswith("srun ")]
    mounts = ('--container-mounts=/scratch:/scratch,"${RUN_DIR}":"${RUN_DIR}",'
              f"{topo.model.path}:{topo.model.path}")
    assert len(steps) == 2 + 1 + 12  # etcd, NATS, frontend, 12 workers
    for step in steps:
        assert "--container-image=nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1" in step
        assert "--no-container-entrypoint --no-container-mount-home" in step
        assert mounts in step


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
    topo = _with(TWO_HOSTS, coordination={"nats": {"auth": {"token_env": "GRAPH_NATS_TOKEN"}}})
    head = render_hosts_files(topo)["node-head.sh"]
    assert 'NATS_AUTH_TOKEN="${GRAPH_NATS_TOKEN:?set GRAPH_NATS_TOKEN to the NATS token}"' \
        in head
    assert "'authorization { token: $NATS_AUTH_TOKEN }'" in head
    assert re.search(r"nats-server -c \"\$\{RUN_DIR\}\"/nats.conf -a 127.0.0.2", head)


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

