"""Graphs that ship inside the package, so `dis-serve up` works from any directory."""

from __future__ import annotations

from pathlib import Path

DEMO_TOPOLOGY = Path(__file__).with_name("demo.yaml")
# The TRT-LLM engine-config templates users read and edit live in the repository's configs/;
# `configs` here links to it, so the package reads that one copy and a wheel ships its files.
ENGINE_TEMPLATES = Path(__file__).with_name("configs")
STARTER_TOPOLOGY = Path(__file__).with_name("starter.yaml")
