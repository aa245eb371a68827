"""Graphs that ship inside the package, so `dis-serve up` works from any directory."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml

# What users read and edit lives in the repository (graphs/demo.yaml, the TRT-LLM engine-config
# templates in configs/); `demo.yaml` and `configs` here link to it, so the package reads that
# one copy and a wheel ships its files.
DEMO_TOPOLOGY = Path(__file__).with_name("demo.yaml")
ENGINE_TEMPLATES = Path(__file__).with_name("configs")
STARTER_TOPOLOGY = Path(__file__).with_name("starter.yaml")


@cache
def template_kv_share(role: str) -> float:
    """The share of free GPU memory a role's engine template gives the KV cache
    (kv_cache_config.free_gpu_memory_fraction): what a pool without its own value gets, so
    the memory check, the planner and the rendered config read one number."""
    template = yaml.safe_load((ENGINE_TEMPLATES / "trtllm" / f"{role}.yaml").read_text())
    return float(template["kv_cache_config"]["free_gpu_memory_fraction"])
