"""A command's options are the fields of its request models (AIPerf's `CLIParameter` idea).

Each field is a flag, `--field-name` unless its `CliFlag` says otherwise, or a positional
argument; its description is the flag's help and the model's validation the only one, so a
model, its flags, its help and its errors cannot drift apart. The CLI builds each command
from its models (`cli/options.py`); a library caller builds the same models with
`parse_values` and gets the same errors.

Errors speak the caller's language: a validator names fields in backticks (`rate`) and says
which field a problem is about (`OptionProblem`); `parse_values` keys its error by field,
and `in_flags` rewords it in the flags a user typed (`--rate`).
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import UserInputError

if TYPE_CHECKING:  # pydantic only where a model is read: the command table is imported by
    from pydantic import BaseModel  # `dis-serve --help`, which stays without it

BACKTICKED = re.compile(r"`(\w+)`")


@dataclass(frozen=True)
class CliFlag:
    """How a field is spelled on the command line where it is not `--field-name`."""

    name: str | None = None
    """The flag (`--price`), where it is not the field's name."""
    metavar: str | None = None
    """What the help shows for its value (`PREFILL:DECODE`; default: from its type)."""
    short: str | None = None
    """A one-letter alias (`-d`)."""
    argument: bool = False
    """A positional argument (`dis-serve status NAME`), not a flag."""
    negatable: bool = True
    """A yes/no field as `--x/--no-x`; False: only `--x` (for a default of no)."""


class OptionProblem(ValueError):
    """What a request model's validator raises: the message (fields in backticks), the field
    it is about and the fix, each reworded in flags for the command line."""

    def __init__(self, message: str, *, field: str | None = None,
                 fix: str | None = None) -> None:
        super().__init__(message)
        self.message, self.field, self.fix = message, field, fix


@dataclass(frozen=True)
class Command:
    """One entry of the command table: the function that runs it and its request models, as
    `module:Class` (imported when the command runs, so `dis-serve --help` stays light); the
    function is called with one instance of each, in order."""

    run: Callable[..., object]
    models: tuple[str, ...] = ()
    hidden: bool = False

    @property
    def name(self) -> str:
        return self.run.__name__.replace("_", "-")

    def function(self) -> Callable[..., object]:
        """`run` as its module holds it when the command runs (a test may stand in for it)."""
        module = sys.modules.get(self.run.__module__)
        return getattr(module, self.run.__name__, self.run)

    def model_classes(self) -> tuple[type[BaseModel], ...]:
        classes = []
        for path in self.models:
            module, _, attribute = path.partition(":")
            classes.append(getattr(importlib.import_module(module), attribute))
        return tuple(classes)


def cli_flag(model: type[BaseModel], field: str) -> CliFlag:
    info = model.model_fields[field]
    return next((m for m in info.metadata if isinstance(m, CliFlag)), CliFlag())


def flag_of(model: type[BaseModel], field: str) -> str:
    """`--field-name`, the flag its `CliFlag` names, or (an argument) `FIELD_NAME`."""
    flag = cli_flag(model, field)
    if flag.argument:
        return flag.metavar or field.upper()
    return flag.name or "--" + field.replace("_", "-")


def _flag_in(models: Sequence[type[BaseModel]], name: str) -> str | None:
    return next((flag_of(m, name) for m in models if name in m.model_fields), None)


def flags_in(models: Sequence[type[BaseModel]], text: str | None) -> str | None:
    """Field names in backticks as the flags that set them (others keep their backticks)."""
    return None if text is None else BACKTICKED.sub(
        lambda m: _flag_in(models, m[1]) or m[0], text)


def in_flags(models: Sequence[type[BaseModel]], exc: UserInputError) -> UserInputError:
    """The error as the command line says it: its key and fields named by their flags."""
    key = _flag_in(models, exc.key) if exc.key else None
    return UserInputError(flags_in(models, exc.detail) or "", source=exc.source,
                          key=key or exc.key, fix=flags_in(models, exc.fix))


def parse_values(model: type[BaseModel], values: dict[str, Any]) -> Any:
    """`model` from keyword values (None: the field's default); any problem becomes one
    UserInputError keyed by the field, its message naming fields in backticks."""
    from pydantic import ValidationError

    try:
        return model(**{k: v for k, v in values.items() if v is not None})
    except ValidationError as exc:
        raise _described(exc.errors(include_url=False)[0]) from None


def _described(error: Any) -> UserInputError:
    field = str(error["loc"][0]) if error["loc"] else None
    problem = (error.get("ctx") or {}).get("error")
    if isinstance(problem, OptionProblem):
        return UserInputError(problem.message, key=problem.field or field, fix=problem.fix)
    message = str(error["msg"])
    if error["type"] == "value_error":
        return UserInputError(message.removeprefix("Value error, "), key=field)
    if error["type"] == "missing":
        return UserInputError("is required", key=field, fix=f"give `{field}`")
    value = error.get("input")
    shown = value if isinstance(value, str) else repr(value)
    return UserInputError(f"{message}, got {shown}", key=field)
