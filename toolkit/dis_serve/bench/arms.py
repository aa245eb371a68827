"""The arms of a `compare`: two topology files, or one topology with one key varied.

`--vary router.mode=kv,round-robin` gives one arm per value, identical in every other
setting, so the difference measured is that setting's. Each value is read as YAML (so
`8` is a number, `true` a flag) and the changed topology is validated like a file, with the
key and value named in any error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..topology import Topology

_KEY = re.compile(r"[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)*")


@dataclass(frozen=True)
class Arm:
    label: str  # how reports name the arm: `router.mode=kv`, or the topology's name
    slug: str  # its directory under the comparison's output
    topology: Topology
    topology_file: Path


def parse_vary(text: str) -> tuple[str, list[str]]:
    """`router.mode=kv,round-robin` -> ("router.mode", ["kv", "round-robin"])."""
    key, sep, values = text.partition("=")
    choices = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not re.fullmatch(_KEY, key.strip()) or len(choices) < 2:
        raise UserInputError(f"{text!r} is not KEY=VALUE1,VALUE2", key="--vary",
                             fix="e.g. --vary router.mode=kv,round-robin")
    if len(set(choices)) != len(choices):
        raise UserInputError(f"{text!r} lists a value twice", key="--vary",
                             fix="give each value once")
    return key.strip(), choices


def vary_arms(path: Path, key: str, values: list[str]) -> list[Arm]:
    """One arm per value of `key` in the topology file at `path`."""
    from ..inputs.yaml_input import load_yaml_text, parse_model, read_yaml_file

    source = str(path)
    base = read_yaml_file(path)
    arms = []
    for value in values:
        data = _with(base, key.split("."), load_yaml_text(value, f"--vary {key}"), source)
        topo = parse_model(Topology, data, f"{source} with {key}={value}")
        slug = re.sub(r"[^a-z0-9]+", "-", f"{key}-{value}".lower()).strip("-")
        arms.append(Arm(label=f"{key}={value}", slug=slug, topology=topo, topology_file=path))
    return arms


def file_arms(paths: list[Path]) -> list[Arm]:
    """One arm per topology file; arms of the same name get A-/B- in front."""
    from ..inputs.yaml_input import load_model_file

    topos = [load_model_file(Topology, p) for p in paths]
    names = [t.name for t in topos]
    clash = len(set(names)) != len(names)
    return [Arm(label=f"{chr(65 + i)}-{t.name}" if clash else t.name,
                slug=f"{chr(97 + i)}-{t.name}" if clash else t.name,
                topology=t, topology_file=p)
            for i, (t, p) in enumerate(zip(topos, paths, strict=True))]


def _with(data: Any, path: list[str], value: Any, source: str) -> dict:
    if not isinstance(data, dict):
        raise UserInputError(f"{'.'.join(path)} does not lead into a mapping", source=source,
                             key="--vary", fix="vary a key of the topology, e.g. router.mode")
    head, rest = path[0], path[1:]
    changed = dict(data)
    changed[head] = value if not rest else _with(data.get(head) or {}, rest, value, source)
    return changed
