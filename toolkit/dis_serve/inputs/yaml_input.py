"""Reading user YAML without surprises, and turning schema errors into one actionable line.

PyYAML's safe loader follows YAML 1.1: `no` becomes False, `010` becomes 8 and `1:30` becomes
90. A topology is configuration people type by hand, so only the YAML 1.2 core forms resolve
(true/false, plain decimal and float numbers, null); anything else stays a string and the
schema then rejects it by name. Anchors and aliases are refused (they hide what a key really
holds and allow "billion laughs" blow-ups), so are duplicate keys, tags and files over 1 MiB.
"""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import UserInputError
from .input_file import require_regular_file

MAX_BYTES = 1024 * 1024
# PyYAML composes nested collections recursively: thousands of `[` end in a RecursionError.
# A topology nests five levels deep; refuse anything far beyond before composing it.
MAX_DEPTH = 32
M = TypeVar("M", bound=BaseModel)


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core scalars, no aliases, no duplicate keys."""


_StrictLoader.yaml_implicit_resolvers = {}
for _tag, _regexp, _first in (
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:int", r"^[-+]?(?:0|[1-9][0-9]*)$", "-+0123456789"),
    ("tag:yaml.org,2002:float",
     r"^[-+]?(?:(?:0|[1-9][0-9]*)\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$|^[-+]?(?:0|[1-9][0-9]*)[eE][-+]?[0-9]+$",
     "-+0123456789."),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
):
    _StrictLoader.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))

_ALLOWED_TAGS = {"tag:yaml.org,2002:" + t for t in
                 ("str", "int", "float", "bool", "null", "seq", "map")}


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}: it appears twice in one mapping",
                key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def _refuse_aliases_and_tags(text: str, source: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise UserInputError(
                    f"line {event.start_mark.line + 1}: nested more than {MAX_DEPTH} levels "
                    "deep", source=source, fix="a topology nests a few levels; flatten it")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.AliasEvent) or anchor:
            line = event.start_mark.line + 1
            raise UserInputError(
                f"line {line}: YAML anchors and aliases (&{anchor} / *{anchor}) are not "
                "accepted", source=source, fix="write the values out in full")
        tag = getattr(event, "tag", None)
        if tag and tag not in _ALLOWED_TAGS and tag != "!":
            line = event.start_mark.line + 1
            raise UserInputError(f"line {line}: YAML tag {tag} is not accepted", source=source,
                                 fix="remove the tag; plain values only")


def load_yaml_text(text: str, source: str) -> Any:
    if len(text.encode()) > MAX_BYTES:
        raise UserInputError(f"file is over {MAX_BYTES // 1024} KiB", source=source,
                             fix="a topology is a few hundred lines at most")
    try:
        _refuse_aliases_and_tags(text, source)
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - _StrictLoader is a SafeLoader
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        problem = exc.problem or str(exc)
        if "could not determine a constructor" in problem:
            problem = f"tag {problem.split('tag ')[-1]} is not accepted (only plain YAML)"
        raise UserInputError(where + problem, source=source,
                             fix="remove the duplicate or the tag") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise UserInputError(f"{where}not valid YAML ({problem})", source=source,
                             fix="check indentation and quoting") from None


def read_yaml_file(path: Path) -> Any:
    source = str(path)
    size = require_regular_file(path)
    if size > MAX_BYTES:
        raise UserInputError(f"file is over {MAX_BYTES // 1024} KiB", source=source,
                             fix="a topology is a few hundred lines at most")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserInputError("file is not UTF-8 text", source=source,
                             fix="save it as UTF-8 YAML") from None
    return load_yaml_text(text, source)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names the schema accepts at `loc` (for did-you-mean)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and
                                          issubclass(current, BaseModel)):
            continue
        field = current.model_fields.get(part)
        if field is None:
            return []
        current = _model_in(field.annotation)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _model_in(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def describe_validation_error(exc: ValidationError, model: type[BaseModel], source: str,
                              data: Any) -> UserInputError:
    """The first error as one line naming file, key, value and fix."""
    err = exc.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    key = _dotted(loc) or None
    kind = err["type"]
    value = err.get("input")
    if kind == "extra_forbidden":
        name = str(loc[-1])
        choices = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
        fix = f"did you mean '{close[0]}'?" if close else (
            f"allowed keys here: {', '.join(choices)}" if choices else "remove it")
        return UserInputError(f"unknown key '{name}'", source=source, key=key, fix=fix)
    if kind == "missing":
        return UserInputError("required key is missing", source=source, key=key,
                              fix=f"add '{loc[-1]}:'")
    if kind == "value_error":
        message = str(err["msg"]).removeprefix("Value error, ")
        return UserInputError(message, source=source, key=key)
    shown = json.dumps(value) if isinstance(value, (str, int, float, bool)) else None
    message = str(err["msg"])
    fix = None
    if kind in ("int_type", "int_parsing") and isinstance(value, str):
        fix = "write a plain decimal number without leading zeros or colons"
    elif kind in ("bool_type", "bool_parsing"):
        fix = "write true or false"
    elif kind == "enum":
        fix = "use one of the listed values"
    elif kind in ("string_type",) and isinstance(value, bool):
        fix = "quote the value"
    text = f"{message}, got {shown}" if shown is not None else message
    return UserInputError(text, source=source, key=key, fix=fix)


def parse_model(model: type[M], data: Any, source: str) -> M:
    """Validate plain data against a schema in strict mode (no silent string->number casts)."""
    if not isinstance(data, dict):
        raise UserInputError("the file must hold a mapping of keys at the top level",
                             source=source, fix=f"see `dis-serve schema` for {model.__name__}")
    try:
        # Through JSON so strict mode still accepts enum values written as strings.
        return model.model_validate_json(json.dumps(data), strict=True)
    except ValidationError as exc:
        raise describe_validation_error(exc, model, source, data) from None


def load_model_file(model: type[M], path: Path) -> M:
    return parse_model(model, read_yaml_file(path), str(path))
