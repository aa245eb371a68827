"""Topology -> TensorRT-LLM engine configs (the `--extra-engine-args` YAML of each pool).

A role's template under configs/trtllm/ holds what every pool of that role shares; the
topology supplies the rest. Pure apart from `write_engine_configs`, the one function that
touches the file system.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from ..builtin import ENGINE_TEMPLATES
from ..topology import Mode, PoolRole, Topology

ENGINE_CONFIG_DIR = "engine-configs"
"""The folder of a run directory (or of a rendered target) that holds the engine configs."""


def engine_config_name(role: PoolRole) -> str:
    """A pool role's engine config file inside an engine-config folder: a run directory's
    ENGINE_CONFIG_DIR, or the ConfigMap Kubernetes mounts."""
    return f"{role.value}.yaml"


def engine_config_path(run_dir: Path, role: PoolRole) -> Path:
    """Where a pool role's engine config lies in a run directory (or a rendered target's
    folder); what `--extra-engine-args` of its workers names."""
    return run_dir / ENGINE_CONFIG_DIR / engine_config_name(role)


def load_template(role: PoolRole, templates: Path = ENGINE_TEMPLATES) -> dict[str, Any]:
    return yaml.safe_load((templates / "trtllm" / f"{role.value}.yaml").read_text())


def cuda_graph_batch_sizes(max_batch_size: int) -> list[int]:
    """Powers of two up to the pool's batch limit, and the limit itself, so every batch the
    scheduler can form pads to a captured graph."""
    sizes = []
    size = 1
    while size < max_batch_size:
        sizes.append(size)
        size *= 2
    sizes.append(max_batch_size)
    return sizes


def render_engine_config(topo: Topology, role: PoolRole,
                         templates: Path = ENGINE_TEMPLATES) -> dict[str, Any]:
    pool = topo.pools.get(role)
    if pool is None:
        raise ValueError(f"topology {topo.name} has no {role.value} pool")
    # Sizing first, the role's shared settings after: the order people read these files in.
    config: dict[str, Any] = {
        "tensor_parallel_size": pool.tensor_parallel,
        "pipeline_parallel_size": 1,
        "max_batch_size": pool.max_batch_size,
        "max_num_tokens": pool.max_num_tokens,
        "max_seq_len": topo.model.max_seq_len,
    }
    config.update(copy.deepcopy(load_template(role, templates)))
    config["disable_overlap_scheduler"] = not role.overlap_scheduler
    kv = config.setdefault("kv_cache_config", {})
    kv.update({
        "dtype": topo.model.kv_cache_dtype.engine_dtype,
        "tokens_per_block": topo.kv_cache.block_size,
    })
    if pool.free_gpu_memory_fraction is not None:  # else the role template's share holds
        kv["free_gpu_memory_fraction"] = pool.free_gpu_memory_fraction
    # The role's template decides whether it captures; null (not absence) is TRT-LLM's "off".
    if config.get("cuda_graph_config") is not None:
        config["cuda_graph_config"]["batch_sizes"] = cuda_graph_batch_sizes(pool.max_batch_size)
    if topo.mode is Mode.DISAGG:
        config["cache_transceiver_config"] = {
            **config.get("cache_transceiver_config", {}),
            "backend": topo.kv_transfer.backend.value,
            "max_tokens_in_buffer": topo.kv_buffer_tokens,
        }
    else:
        config.pop("cache_transceiver_config", None)
    return config


def render_engine_configs(topo: Topology, templates: Path = ENGINE_TEMPLATES
                          ) -> dict[PoolRole, dict[str, Any]]:
    return {role: render_engine_config(topo, role, templates) for role, _ in topo.active_pools()}


def dump_engine_config(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def write_engine_configs(topo: Topology, run_dir: Path) -> dict[PoolRole, Path]:
    """Write each pool's config where the launch plan's `--extra-engine-args` points."""
    written = {}
    for role, config in render_engine_configs(topo).items():
        path = engine_config_path(run_dir, role)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dump_engine_config(config))
        written[role] = path
    return written
