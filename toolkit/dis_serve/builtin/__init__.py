"""Graphs that ship inside the package, so `dis-serve up` works from any directory."""

from __future__ import annotations

from pathlib import Path

# What users read and edit lives in the repository (graphs/demo.yaml, the TRT-LLM engine-config
# templates in configs/); `demo.yaml` and `configs` here link to it, so the package reads that
# one copy and a wheel ships its files.
DEMO_TOPOLOGY = Path(__file__).with_name("demo.yaml")
ENGINE_TEMPLATES = Path(__file__).with_name("configs")
STARTER_TOPOLOGY = Path(__file__).with_name("starter.yaml")
