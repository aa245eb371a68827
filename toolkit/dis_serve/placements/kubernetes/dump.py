"""Kubernetes manifests as one multi-document YAML file, with the notes that go with them as
its leading comment."""

from __future__ import annotations

import textwrap

import yaml


class _ManifestDumper(yaml.SafeDumper):
    """Multi-line strings (engine configs inside the ConfigMap) as readable `|` blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _represent_str)


def dump_manifests(docs: list[dict], notes: list[str] = (),
                   heading: str = "What Dynamo's operator does with these manifests:") -> str:
    """The documents as one multi-document YAML file, `notes` under `heading` as its leading
    comment."""
    header = "".join(textwrap.fill(note, width=98, initial_indent="# - ",
                                   subsequent_indent="#   ", break_on_hyphens=False,
                                   break_long_words=False) + "\n" for note in notes)
    if header:
        header = f"# {heading}\n" + header
    return header + yaml.dump_all(docs, Dumper=_ManifestDumper, sort_keys=False,
                                  default_flow_style=False)
