"""Graphs that ship inside the package, so `dis-serve up` works from any directory."""

from __future__ import annotations

from pathlib import Path

DEMO_TOPOLOGY = Path(__file__).with_name("demo.yaml")
ENGINE_TEMPLATES = Path(__file__).with_name("configs")
STARTER_TOPOLOGY = Path(__file__).with_name("starter.yaml")
