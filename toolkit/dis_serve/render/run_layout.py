"""The run directory's layout: every name in it, in one place. Renderers write these names
into scripts and plans (the rendered directory is a run directory), the launcher, the node
agents and every verb read them.

    run.json                  the run record (launch/run_record.py): placement, nodes,
                              endpoints, TLS files, job id, engine, versions
    topology.json             the validated topology the run was started from
    plan.json                 a local graph's launch plan (its `revision` raised by every
                              change of the running graph, which the supervisor follows)
    state.json                what its supervisor observed last
    cluster-plan.json         a multi-node graph's plan: every node's processes (revision too)
    render-context.json       what the plan was rendered with besides the topology
    change.json, change.lock  the last change of the running graph (launch/change_record.py)
    changes.jsonl             every finished change, one line each
    addresses                 NODE_ADDR_<i>/NODE_<i> lines a Slurm job resolved on its nodes
    endpoint                  the frontend's URL, written by the head's agent once it served
    job-started               Unix time a Slurm job's batch script started
    stop-request              asks every node's agent to stop its node in order
    state-/plan-/heartbeat-<node>.json   each node agent's state, resolved plan, heartbeat
    fault-<node>-<id>.json    a fault asked of a node's agent
    logs/<process>.log        each process's log (rotated), logs/supervisor.log, agent-<node>
    previous/<time>/          earlier runs' logs and state (`up --keep-runs`)
    etcd-data/, nats-data/    a local graph's etcd and NATS data
    tls/                      the graph's CA and certificates (security/pki_files.py)
    engine-configs/, model-card/, nats.conf   what the workers and NATS read

Names only (no I/O); `launch/rundir.RunDir` is the directory's reader and writer.
"""

from __future__ import annotations

from ..security.pki_files import TLS_DIR

RECORD_FILE = "run.json"
TOPOLOGY_FILE = "topology.json"
PLAN_FILE = "plan.json"
STATE_FILE = "state.json"
CLUSTER_PLAN_FILE = "cluster-plan.json"
# The plan's render inputs besides the topology (interpreter, binaries, model directory): a
# change of the running graph renders its new workers with them.
CONTEXT_FILE = "render-context.json"
CHANGE_FILE = "change.json"
CHANGE_LOCK = "change.lock"
# Every finished change, one JSON line each (how it went, step by step, with its timings).
CHANGE_HISTORY = "changes.jsonl"
# What a new run of the same name starts without: the changes of the run before.
CHANGE_FILES = (CHANGE_FILE, CHANGE_HISTORY)
# NODE_ADDR_<i>=<address> and NODE_<i>=<host name> per line: what a Slurm job's batch
# script resolved on each node; the agents and the client read it.
ADDRESSES_FILE = "addresses"
ENDPOINT_FILE = "endpoint"
# Unix time the batch script started: submit to this is the scheduler's (and launch's) share.
STARTED_FILE = "job-started"
# Made by `down` (hosts) or the batch script's trap (Slurm): every agent started before it
# stops its node in order (launch/agent_contact.py).
STOP_REQUEST_FILE = "stop-request"
LOGS_DIR = "logs"
SUPERVISOR_LOG = "supervisor.log"
MODEL_CARD_DIR = "model-card"
ENGINE_CONFIG_DIR = "engine-configs"
NATS_CONFIG = "nats.conf"
OBSERVABILITY_DIR = "observability"
PREVIOUS_DIR = "previous"
# A local graph's etcd and NATS data (a multi-node graph's are on the head node's own disk).
ETCD_DATA, NATS_DATA = COORDINATION_DATA = ("etcd-data", "nats-data")
FAULT_PREFIX = "fault-"
# What the node agents write beside each other, per node.
AGENT_FILE_GLOBS = ("state-*.json", "heartbeat-*.json", "plan-*.json")
# What an earlier run of a multi-node graph left in its directory; the next must not be
# judged by it (its agents' views and plans, its endpoint, a stop request, its CA, its
# changes).
EARLIER_RUN_GLOBS = (*COORDINATION_DATA, LOGS_DIR, ENDPOINT_FILE, ADDRESSES_FILE, STARTED_FILE,
                     STOP_REQUEST_FILE, STATE_FILE, TLS_DIR, *AGENT_FILE_GLOBS,
                     f"{FAULT_PREFIX}*", *CHANGE_FILES)
# Before run.json, a Slurm graph's record of its job (read in earlier versions' run
# directories only).
LEGACY_SLURM_JOB_FILE = "slurm-job.json"


def node_state_file(node: str) -> str:
    return f"state-{node}.json"


def node_plan_file(node: str) -> str:
    return f"plan-{node}.json"


def heartbeat_file_name(node: str) -> str:
    return f"heartbeat-{node}.json"


def agent_log_name(node: str) -> str:
    """`logs` name of node `node`'s agent (logs/agent-<node>.log)."""
    return f"agent-{node}"
