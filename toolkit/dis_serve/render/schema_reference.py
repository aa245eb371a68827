"""A pydantic model's JSON Schema as a Markdown reference: one section per nested model.

`dis-serve schema --markdown` writes `docs/topology.md` with it, so the reference cannot drift
from the schema: every key, its type (enums with their values, bounds included), its default
and its description come from the model, and a unit test fails when the checked-in file is
stale. Sections follow the file's own order (breadth first from the top level); a model used
at several places (a pool) is one section that lists its paths.
"""

from __future__ import annotations

import copy
import json
import re
from collections import deque
from dataclasses import dataclass, field
from typing import get_args

from pydantic import BaseModel
from pydantic_core import to_jsonable_python

REF_PREFIX = "#/$defs/"
# Set by `with_factory_defaults` on a section-typed property: the keys its default changes.
FACTORY_SECTION = "x-section-default"
# Bounds as JSON Schema spells them and as the reference shows them.
BOUNDS = {"minimum": ">= {}", "exclusiveMinimum": "> {}", "maximum": "<= {}",
          "exclusiveMaximum": "< {}", "minLength": "length >= {}", "maxLength": "length <= {}",
          "minItems": "items >= {}", "maxItems": "items <= {}", "pattern": "full match `{}`"}
# pydantic anchors a field's pattern as ^(?:...)$; the reference shows the rule inside.
_ANCHORED = re.compile(r"\^\(\?:(.*)\)\$")


@dataclass
class _Section:
    name: str
    schema: dict
    paths: list[str] = field(default_factory=list)


def markdown_reference(schema: dict, *, title: str, preamble: str) -> str:
    """The reference for a model's `model_json_schema()`: a title, the preamble, then a
    section with a table (key, type, default, description) for the top level and for each
    nested model."""
    defs = schema.get("$defs", {})
    lines = [f"# {title}", "", " ".join(preamble.split()), ""]
    for section in _sections(schema, defs):
        lines += _section_lines(section, defs)
    return "\n".join(lines).rstrip() + "\n"


def _sections(schema: dict, defs: dict) -> list[_Section]:
    """The top level, then every model it reaches, in the order a reader meets them."""
    top = _Section(schema.get("title", "top level"), schema)
    sections = {top.name: top}
    queue = deque([(top, "")])
    while queue:
        section, prefix = queue.popleft()
        for key, prop in section.schema.get("properties", {}).items():
            for name, suffix in _models_in(prop, defs):
                path = f"{prefix}{key}{suffix}"
                if name not in sections:
                    sections[name] = _Section(name, defs[name])
                    queue.append((sections[name], path + "."))
                sections[name].paths.append(path)
    return list(sections.values())


def _models_in(prop: dict, defs: dict) -> list[tuple[str, str]]:
    """The object models a property holds, each with the path suffix that reaches it: ``
    for the model itself, `[]` for a list's items, `.<name>` for a map's values."""
    found = []
    if (name := _ref_name(prop)) is not None and _is_model(defs[name]):
        found.append((name, ""))
    for option in prop.get("anyOf", []):
        found += _models_in(option, defs)
    if isinstance(prop.get("items"), dict):
        found += [(n, "[]" + s) for n, s in _models_in(prop["items"], defs)]
    if isinstance(prop.get("additionalProperties"), dict):
        found += [(n, ".<name>" + s) for n, s in _models_in(prop["additionalProperties"], defs)]
    return found


def _section_lines(section: _Section, defs: dict) -> list[str]:
    schema = section.schema
    lines = [f'<a id="{_anchor(section.name)}"></a>', f"## {section.name}", ""]
    if section.paths:
        lines += ["At " + ", ".join(f"`{p}`" for p in section.paths) + ".", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    required = set(schema.get("required", []))
    lines += ["| key | type | default | description |", "|---|---|---|---|"]
    for key, prop in schema.get("properties", {}).items():
        cells = (f"`{key}`", _type(prop, defs), _default(prop, key in required, defs),
                 " ".join(_description(prop, defs).split()))
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return [*lines, ""]


def _type(prop: dict, defs: dict) -> str:
    """A property's type in words: models link to their section, enums list their values."""
    if "anyOf" in prop:
        options = [o for o in prop["anyOf"] if o.get("type") != "null"]
        shown = " or ".join(_type(o, defs) for o in options)
        nullable = len(options) < len(prop["anyOf"])
        return f"{shown} or null" if nullable else shown
    if (name := _ref_name(prop)) is not None:
        target = defs[name]
        if _is_model(target):
            return f"[{name}](#{_anchor(name)})"
        return _type(target, defs)
    if "enum" in prop:
        return "one of " + ", ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    kind = prop.get("type", "any")
    if kind == "array":
        kind = f"list of {_type(prop.get('items', {}), defs)}"
    elif kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        kind = f"map of string to {_type(prop['additionalProperties'], defs)}"
    bounds = [text.format(_unanchored(prop[key]) if key == "pattern" else prop[key])
              for key, text in BOUNDS.items() if key in prop]
    return f"{kind} ({', '.join(bounds)})" if bounds else kind


def _unanchored(pattern: str) -> str:
    match = _ANCHORED.fullmatch(pattern)
    return match.group(1) if match else pattern


def _default(prop: dict, required: bool, defs: dict) -> str:
    if required:
        return "required"
    if FACTORY_SECTION in prop:
        changed = prop[FACTORY_SECTION]
        return (f"its section's defaults, but `{json.dumps(changed)}`" if changed
                else "its section's defaults")
    if "default" in prop:
        return f"`{json.dumps(prop['default'])}`"
    return "-"


def with_factory_defaults(schema: dict, model: type[BaseModel]) -> dict:
    """`schema` (a copy) with the defaults JSON Schema leaves out: those of `default_factory`
    fields (an empty list; a nested section, noted with the keys where the field's default
    differs from the section's own, e.g. supervision.etcd's faster restarts)."""
    schema = copy.deepcopy(schema)
    for cls in _models_reachable(model):
        def_schema = schema if cls is model else schema["$defs"][cls.__name__]
        for name, info in cls.model_fields.items():
            if info.default_factory is None:
                continue
            prop = def_schema["properties"][info.alias or name]
            value = info.default_factory()
            if isinstance(value, BaseModel):
                prop[FACTORY_SECTION] = _changed_keys(value)
            else:
                prop["default"] = to_jsonable_python(value)
    return schema


def _changed_keys(section: BaseModel) -> dict:
    """The section's values that differ from what an empty section would have."""
    own = type(section)().model_dump(mode="json")
    return {k: v for k, v in section.model_dump(mode="json").items() if own.get(k) != v}


def _models_reachable(model: type[BaseModel]) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []
    pending = [model]
    while pending:
        cls = pending.pop()
        if cls in found:
            continue
        found.append(cls)
        for info in cls.model_fields.values():
            pending += [t for t in _types_in(info.annotation) if issubclass(t, BaseModel)]
    return found


def _types_in(annotation: object) -> list[type]:
    if isinstance(annotation, type):
        return [annotation]
    return [t for arg in get_args(annotation) for t in _types_in(arg)]


def _description(prop: dict, defs: dict) -> str:
    """The field's own description, else (a section without one) its model's."""
    if "description" in prop:
        return prop["description"]
    name = _ref_name(prop)
    return defs[name].get("description", "") if name is not None else ""


def _ref_name(prop: dict) -> str | None:
    ref = prop.get("$ref")
    return ref.removeprefix(REF_PREFIX) if isinstance(ref, str) else None


def _is_model(schema: dict) -> bool:
    return schema.get("type") == "object" and "properties" in schema


def _anchor(name: str) -> str:
    return name.lower()


def _cell(text: str) -> str:
    """Table cells keep their pipes (an enum's `a | b` in a description) as text."""
    return text.replace("|", "\\|")


TOPOLOGY_DOC = "docs/topology.md"
REGENERATE = f"dis-serve schema --markdown > {TOPOLOGY_DOC}"
TOPOLOGY_PREAMBLE = f"""
Every key of a topology YAML file, section by section, generated from the `Topology` model
(`{REGENERATE}`; a unit test fails when this file is stale, so do not edit it by hand). Unknown
keys are errors (with a "did you mean"), and rules across fields (GPU budget, parallelism,
ports, memory) are checked by `dis-serve validate`. `dis-serve schema` prints the same schema
as JSON Schema for an editor's YAML support; `dis-serve init` writes a commented starter file.
"""


def topology_reference() -> str:
    """`docs/topology.md`: the reference for the `Topology` model."""
    from ..topology import Topology

    schema = with_factory_defaults(Topology.model_json_schema(), Topology)
    return markdown_reference(schema, title="Topology reference", preamble=TOPOLOGY_PREAMBLE)
