"""The cross-field rules of a topology: each raises ValueError with a message that names the
key, the value and the fix. Pure: they read the topology and the catalog, never the machine
(ports in use, binaries, GPUs present are preflight's job)."""

from __future__ import annotations

import math
from urllib.parse import urlsplit

from ..hardware.catalog import KNOWN_MODELS, find_known_model
from ..hardware.sizing import GIB
from .base import MAX_SYSTEM_PORT, is_valid_name
from .enums import EtcdMode, Mode, NatsMode, PoolRole, ProcessKind, WeightDtype
from .kubernetes import quantity_bytes
from .packing import pack_gpus
from .placement import (
    ADDRESS_RE,
    HOST_NAME_RE,
    SLURM_TIME_RE,
    SLURM_WORD_RE,
    HostsPlacement,
    SlurmPlacement,
)
from .security import exposure_problem
from .spec import TopologySpec


def check_name(topo: TopologySpec) -> None:
    if not is_valid_name(topo.name):
        raise ValueError(f"name {topo.name[:60]!r} must be 2-40 lower-case letters, digits or "
                         "dashes, starting with a letter (it becomes a Kubernetes name)")


def check_architecture(topo: TopologySpec) -> None:
    if topo.model.architecture is None and find_known_model(topo.model.id) is None:
        raise ValueError(
            f"model.architecture is required: {topo.model.id!r} is not in the catalog "
            f"({', '.join(k for k in KNOWN_MODELS if KNOWN_MODELS[k].aiconfigurator_name)}); "
            "add architecture: {layers, "
            "attention_heads, kv_heads, hidden_size, params_billion} from its config.json")


def check_placement(topo: TopologySpec) -> None:
    placement = topo.placement
    if placement.hosts is not None:
        _check_hosts(topo, placement.hosts)
    if placement.slurm is not None:
        _check_slurm(topo, placement.slurm)
    if placement.kind.multi_node:
        coord = topo.coordination
        for key, mode, url in (("etcd", coord.etcd.mode.value, coord.etcd.url),
                               ("nats", coord.nats.mode.value, coord.nats.url)):
            host = (urlsplit(url).hostname or "") if url and mode == "external" else ""
            if host == "localhost" or host.startswith("127.") or host == "::1":
                raise ValueError(
                    f"coordination.{key}.url {url} is a loopback address but placement "
                    f"is {placement.kind.value}: workers on other nodes cannot reach it; "
                    "use the server's cluster address or mode: embedded")


def _check_hosts(topo: TopologySpec, hosts: HostsPlacement) -> None:
    names = [n.name for n in hosts.nodes]
    for index, node in enumerate(hosts.nodes):
        key = f"placement.hosts.nodes[{index}]"
        if not HOST_NAME_RE.fullmatch(node.name):
            raise ValueError(f"{key}.name {node.name!r} must be letters, digits, dots, "
                             "dashes or underscores (it names node-<name>.sh)")
        if not ADDRESS_RE.fullmatch(node.address):
            raise ValueError(f"{key}.address {node.address!r} is not an IP address or host "
                             "name; give the node's cluster-facing address, e.g. 10.0.0.2")
        if names.count(node.name) > 1:
            raise ValueError(f"{key}.name {node.name!r} is listed twice; name each node "
                             "once")
        if node.gpus is not None and node.gpus > topo.hardware.gpus_per_node:
            raise ValueError(f"{key}.gpus {node.gpus} is more than hardware.gpus_per_node "
                             f"({topo.hardware.gpus_per_node}); raise gpus_per_node")
    addresses = [n.address for n in hosts.nodes]
    if len(set(addresses)) != len(addresses):
        raise ValueError("placement.hosts.nodes share an address; give each node its own "
                         "cluster-facing address")
    if hosts.head is not None and hosts.head not in names:
        raise ValueError(f"placement.hosts.head {hosts.head!r} is not a node; use one of "
                         f"{names}")
    if len(names) != topo.hardware.nodes:
        raise ValueError(f"placement.hosts lists {len(names)} nodes but hardware.nodes is "
                         f"{topo.hardware.nodes}; set hardware.nodes: {len(names)}")


def _check_slurm(topo: TopologySpec, slurm: SlurmPlacement) -> None:
    hw = topo.hardware
    if slurm.nodes is not None and slurm.nodes != hw.nodes:
        raise ValueError(f"placement.slurm.nodes {slurm.nodes} differs from hardware.nodes "
                         f"({hw.nodes}); set one of them, or both to the same number")
    if (topo.backend.needs_gpu and slurm.gpus_per_node is not None
            and slurm.gpus_per_node < hw.gpus_per_node):
        raise ValueError(f"placement.slurm.gpus_per_node {slurm.gpus_per_node} is below "
                         f"hardware.gpus_per_node ({hw.gpus_per_node}); request "
                         f"{hw.gpus_per_node} or lower hardware.gpus_per_node")
    for key in ("partition", "account", "job_name"):
        value = getattr(slurm, key)
        if value is not None and not SLURM_WORD_RE.fullmatch(value):
            raise ValueError(f"placement.slurm.{key} {value!r} must be letters, digits and "
                             "_ . , @ + - (it goes on an #SBATCH line)")
    if not SLURM_TIME_RE.fullmatch(slurm.time_limit):
        raise ValueError(f"placement.slurm.time_limit {slurm.time_limit!r} is not a Slurm "
                         "time; use HH:MM:SS or D-HH:MM:SS")
    for line in slurm.sbatch_extra:
        if not line.startswith("-") or "\n" in line:
            raise ValueError(f"placement.slurm.sbatch_extra entry {line!r} must be one "
                             "sbatch option such as --exclusive (no #SBATCH prefix)")


def check_replicas(topo: TopologySpec) -> None:
    """Frontend replicas and etcd members each on their own node; the one address clients
    use (floating or the site's balancer) only where there are nodes to move between."""
    nodes = len(topo.node_gpus())
    multi = topo.placement.kind.multi_node
    where = f"the graph's {nodes} node{'s' if nodes != 1 else ''}"
    front = topo.frontend
    if not front.balancer and topo.frontend_replicas > 1:
        raise ValueError(f"frontend.replicas {topo.frontend_replicas} needs the load balancer "
                         "in front of them, and frontend.balancer is false; set replicas: 1 "
                         "or remove balancer: false")
    if multi and topo.frontend_replicas > nodes:
        raise ValueError(f"frontend.replicas {topo.frontend_replicas} is more than {where}: "
                         "each replica runs on its own node, so that losing a node loses "
                         f"one; set frontend.replicas to {nodes} or fewer")
    for plane in ("etcd", "nats"):
        members = getattr(topo.coordination, plane).members
        if members is not None and members > 1 and (not multi or members > nodes):
            raise ValueError(f"coordination.{plane}.members {members} needs {members} nodes "
                             "of a hosts or Slurm graph (one member each), and this graph has "
                             f"{nodes if multi else 'one machine'}; set members: 1"
                             + (" or add nodes" if multi else ""))
    for key, value in (("floating_address", front.floating_address),
                       ("balancer_url", front.balancer_url)):
        if value is not None and not multi:
            raise ValueError(f"frontend.{key} is for hosts and Slurm graphs, and this graph "
                             "runs on one machine (its replicas share this machine's address); "
                             "remove it")
    if front.floating_address is None:
        return
    if topo.frontend_replicas < 2:
        raise ValueError("frontend.floating_address moves between the nodes of the frontend "
                         "replicas, and frontend.replicas is 1; set replicas: 2 or remove "
                         "floating_address")
    if front.host is not None:
        raise ValueError(f"frontend.host {front.host} and frontend.floating_address are both "
                         "set; the load balancer binds the floating address: remove host")
    hosts = topo.placement.hosts
    if hosts is not None and front.floating_address.address in {n.address for n in hosts.nodes}:
        raise ValueError(f"frontend.floating_address.address {front.floating_address.address} "
                         "is a node's own address; give an unused address of the same network")


def check_pools(topo: TopologySpec) -> None:
    wanted = set(topo.mode.pool_roles)
    for role in PoolRole:
        present = topo.pools.get(role) is not None
        if role in wanted and not present:
            raise ValueError(f"pools.{role.value} is missing: mode {topo.mode.value} needs "
                             + " and ".join(f"pools.{r.value}" for r in topo.mode.pool_roles))
        if role not in wanted and present:
            raise ValueError(f"pools.{role.value} is set but mode is {topo.mode.value}; "
                             f"remove it or set mode: "
                             f"{'agg' if role is PoolRole.AGG else 'disagg'}")


def check_parallelism(topo: TopologySpec) -> None:
    arch = topo.model.resolved_architecture()
    for role, pool in topo.active_pools():
        tp = pool.tensor_parallel
        for what, heads in (("attention_heads", arch.attention_heads),
                            ("kv_heads", arch.kv_heads)):
            if heads % tp:
                ok = [d for d in range(1, heads + 1) if heads % d == 0 and
                      arch.attention_heads % d == 0 and arch.kv_heads % d == 0]
                raise ValueError(
                    f"pools.{role.value}.tensor_parallel {tp} does not divide the model's "
                    f"{what} ({heads}); use one of {ok}")
        largest_node = max(topo.node_gpus())
        if tp > largest_node:
            fits = max(d for d in range(1, largest_node + 1) if arch.attention_heads % d == 0
                       and arch.kv_heads % d == 0) if largest_node else 0
            raise ValueError(
                f"pools.{role.value}.tensor_parallel {tp} is more than the GPUs of the "
                f"largest node ({largest_node}); a worker never spans nodes: use "
                f"tensor_parallel {fits} (the largest that fits) and more workers")


def check_gpu_ids(topo: TopologySpec) -> None:
    seen: dict[int, str] = {}
    usable = topo.usable_gpu_ids()
    per_node = topo.hardware.gpus_per_node
    for role, pool in topo.active_pools():
        if pool.gpu_ids is None:
            continue
        key = f"pools.{role.value}.gpu_ids"
        if len(pool.gpu_ids) != pool.workers:
            raise ValueError(f"{key} lists {len(pool.gpu_ids)} workers but workers is "
                             f"{pool.workers}; give one list per worker")
        for ids in pool.gpu_ids:
            if len(ids) != pool.tensor_parallel:
                raise ValueError(f"{key} entry {ids} has {len(ids)} GPUs but "
                                 f"tensor_parallel is {pool.tensor_parallel}")
            if len({i // per_node for i in ids}) > 1:
                raise ValueError(f"{key} entry {ids} spans nodes; a worker's GPUs must be "
                                 f"on one node ({per_node} GPUs each)")
            for gpu in ids:
                if gpu not in usable:
                    raise ValueError(f"{key}: GPU id {gpu} is not on any node (node n "
                                     f"holds n*{per_node} up to its GPU count)")
                if gpu in seen:
                    raise ValueError(f"{key}: GPU id {gpu} is already used by "
                                     f"{seen[gpu]}; each GPU serves one worker")
                seen[gpu] = key


def check_gpu_budget(topo: TopologySpec) -> None:
    counts = topo.node_gpus()
    need, have = topo.total_gpus, sum(counts)
    where = (f"{len(counts)} nodes x {topo.hardware.gpus_per_node}"
             if len(set(counts)) == 1 else "nodes with " + "+".join(map(str, counts)))
    if need > have:
        parts = ", ".join(f"{r.value} {p.workers}x{p.tensor_parallel}"
                          for r, p in topo.active_pools())
        raise ValueError(
            f"pools need {need} GPUs ({parts}) but the placement has {have} ({where}); "
            "add nodes or shrink the pools")
    ceiling = topo.ceiling_gpus
    if ceiling > have:
        parts = ", ".join(f"{r.value} {topo.max_workers(r)}x{p.tensor_parallel}"
                          for r, p in topo.active_pools() if p.max_workers is not None)
        raise ValueError(
            f"the pools' max_workers need {ceiling} GPUs ({parts}) but the placement has "
            f"{have} ({where}); add nodes (on Slurm the job holds hardware.nodes) or lower "
            "max_workers")
    # Packing may fail even when the count fits (TP fragments nodes).
    usable = topo.usable_gpu_ids()
    assignment = pack_gpus(topo.active_pools(), topo.hardware.gpus_per_node, counts)
    if any(g not in usable for workers in assignment.values() for ids in workers
           for g in ids):
        raise ValueError(
            f"pools need {need} GPUs but workers of these tensor_parallel sizes cannot be "
            f"packed into {where} without splitting a worker across nodes; add a node or "
            "change tensor_parallel")


def check_memory(topo: TopologySpec) -> None:
    # Checked for the mocker too: its topology describes the hardware it stands in for,
    # and `plan --mock` graphs must be as deployable as their trtllm twins.
    for role, _pool in topo.active_pools():
        fit = topo.memory_fit(role)
        if not fit.fits:
            raise ValueError(f"pools.{role.value}: {fit.explain()}")


def check_ports(topo: TopologySpec) -> None:
    used: dict[int, str] = {}

    def claim(port: int, owner: str) -> None:
        if port in used:
            raise ValueError(f"port {port} is used by both {used[port]} and {owner}; give "
                             f"{owner} another port")
        used[port] = owner

    claim(topo.frontend.port, ProcessKind.FRONTEND.port_key("http"))
    replicas = max(topo.frontend_replicas, topo.local_frontend_replicas)
    if topo.frontend.balancer:
        first = topo.frontend.first_replica_port
        unset = "" if topo.frontend.replica_port is not None else ", unset: frontend.port + 1"
        if first + replicas - 1 > 65535:
            raise ValueError(f"frontend.replica_port {first}{unset} + {replicas} replicas "
                             "passes 65535; set frontend.replica_port lower")
        for i in range(replicas):
            offset = f" + {i}" if i else ""
            claim(first + i, f"frontend replica {i} (frontend.replica_port{offset}{unset})")
    if topo.autoscale is not None:
        claim(topo.autoscale.system_port, ProcessKind.PLANNER.port_key("system"))
        claim(topo.autoscale.system_port + 1, ProcessKind.PLANNER.port_key("scaler"))
    etcd = topo.coordination.etcd
    if etcd.mode is EtcdMode.EMBEDDED:
        claim(etcd.client_port, ProcessKind.ETCD.port_key("client"))
        claim(etcd.peer_port, ProcessKind.ETCD.port_key("peer"))
    nats = topo.coordination.nats
    if nats.mode is NatsMode.EMBEDDED:
        claim(nats.port, ProcessKind.NATS.port_key("client"))
        if topo.nats_members > 1:
            claim(nats.cluster_port, ProcessKind.NATS.port_key("cluster"))
    workers = sum(p.workers for _, p in topo.active_pools())
    base = topo.observability.system_port_base
    # Dynamo reads DYN_SYSTEM_PORT as a signed 16-bit number.
    if base + workers - 1 > MAX_SYSTEM_PORT:
        raise ValueError(f"observability.system_port_base {base} + {workers} workers "
                         f"passes {MAX_SYSTEM_PORT}, the highest system port Dynamo "
                         f"accepts; set it to {MAX_SYSTEM_PORT - workers + 1} or lower")
    for i in range(workers):
        claim(base + i, f"worker {i} system port ({ProcessKind.WORKER.port_key('system', i)})")


def check_checkpoint(topo: TopologySpec) -> None:
    # The mocker loads a tokenizer only; every other backend loads the weights, and the
    # memory fit above assumes they are in model.dtype.
    model = topo.model
    if not topo.backend.needs_gpu or not model.dtype.needs_quantized_checkpoint:
        return
    known = find_known_model(model.id)
    holds = known.dtype_of(model.id) if known else None
    if holds == model.dtype.value:
        return
    if holds is None and model.prequantized:
        return
    wanted = known.checkpoint(model.dtype.value) if known else None
    fix = (f"set model.id: {wanted.hf_id} ({wanted.source})" if wanted else
           f"quantize it to {model.dtype.value} with NVIDIA Model Optimizer, set model.id "
           "to the result and model.prequantized: true")
    if holds:
        tp = min(pool.tensor_parallel for _, pool in topo.active_pools())
        gib = model.resolved_architecture().params_billion * 1e9 / tp / GIB
        what = (f"is the {holds} checkpoint: TRT-LLM would load "
                f"{gib * WeightDtype(holds).bytes_per_param:.1f} GiB of weights per GPU at "
                f"TP{tp}, not {gib * model.dtype.bytes_per_param:.1f}")
    else:
        what = (f"is not known to hold {model.dtype.value} weights (TRT-LLM loads what the "
                "checkpoint holds)")
    raise ValueError(
        f"model.dtype is {model.dtype.value} but model.id {model.id!r} {what}; {fix}"
        + ("" if holds else " (or set model.prequantized: true if it already is)"))


def check_autoscale(topo: TopologySpec) -> None:
    scale = topo.autoscale
    if scale is None:
        return
    budget = scale.max_gpus or topo.hardware.total_gpus
    floor = sum(pool.min_workers * pool.tensor_parallel for _, pool in topo.active_pools())
    if floor > budget:
        raise ValueError(
            f"autoscale.max_gpus {budget} is below the GPUs the pools' min_workers need "
            f"({floor}); raise max_gpus or lower min_workers")
    if scale.max_gpus is not None and scale.max_gpus > topo.hardware.total_gpus:
        raise ValueError(
            f"autoscale.max_gpus {scale.max_gpus} is above the hardware's "
            f"{topo.hardware.total_gpus} GPUs; lower it or add nodes")


def check_kv_buffer(topo: TopologySpec) -> None:
    if topo.mode is not Mode.DISAGG:
        return
    buffer = topo.kv_buffer_tokens
    longest = topo.model.max_input_tokens
    if buffer <= longest:
        # Dynamo's examples: "Must exceed max ISL to avoid transfer failures and perf
        # degradation" (engine_configs/deepseek-r1/disagg/simple/prefill.yaml).
        raise ValueError(
            f"kv_transfer.max_tokens_in_buffer {buffer} does not exceed model.max_input_tokens "
            f"({longest}); the longest prompt's KV transfer can fail or stall; set it above "
            f"{longest}, e.g. {1 << longest.bit_length()}")


def check_security(topo: TopologySpec) -> None:
    problem = exposure_problem(topo.security, topo.off_loopback_because)
    if problem:
        raise ValueError(problem)


def check_model_cache(topo: TopologySpec) -> None:
    """A model-cache claim the topology sizes itself must hold the checkpoint it downloads."""
    cache = topo.kubernetes.model_cache
    if cache.size is None or cache.existing or not topo.backend.needs_gpu:
        return
    holds = quantity_bytes(cache.size) / 1e9
    need = topo.model_files_gb
    if holds < need:
        gib = math.ceil(need * 1e9 / 2**30 * 1.25)
        raise ValueError(
            f"kubernetes.model_cache.size {cache.size} ({holds:.1f} GB) cannot hold the "
            f"{need:.1f} GB of {topo.model.id} the download Job fetches; set it to at least "
            f"{gib}Gi, or leave it unset to size it from the download")


def check_kubernetes_tls(topo: TopologySpec) -> None:
    if topo.kubernetes.tls.planes and not topo.security.tls.mode.encrypts:
        raise ValueError("kubernetes.tls.planes is true (the platform's etcd and NATS require "
                         "TLS client certificates) but security.tls.mode is off, so the pods "
                         "hold no certificate; turn TLS on or set planes: false")


# In the order they run: the first broken rule is the one reported.
RULES = (check_name, check_architecture, check_placement, check_replicas, check_pools,
         check_parallelism, check_gpu_ids, check_gpu_budget, check_checkpoint, check_memory,
         check_ports, check_kv_buffer, check_autoscale, check_security, check_model_cache,
         check_kubernetes_tls)
