"""Every option error is one line on stderr with exit 2, on every command: an unknown option,
a missing argument, and a bad value of each typed option of every command whose options come
from its request models (the command table), each naming the flag."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Union, get_args, get_origin

import pytest

from conftest import assert_one_line_error
from dis_serve.cli.app import build_app, command_table
from dis_serve.inputs.options import cli_flag, flag_of

COMMANDS = [command.name or command.callback.__name__.replace("_", "-")
            for command in build_app().registered_commands]
TABLE = command_table()
# Values that are wrong for a type whatever the field's bounds.
BAD = {int: "many", float: "nan"}
# Required values a bare type cannot make up.
FILLERS = {("plan", "model"): "llama-3.1-8b"}


def _base(annotation):
    args = [a for a in get_args(annotation) if a is not type(None)]
    return args[0] if get_origin(annotation) in (UnionType, Union) and len(args) == 1 else (
        annotation)


def _bad_value(annotation) -> str | None:
    base = _base(annotation)
    if isinstance(base, type) and issubclass(base, StrEnum):
        return "no-such-choice"
    return BAD.get(base)


def _filler(command: str, field: str, annotation) -> str:
    if (command, field) in FILLERS:
        return FILLERS[(command, field)]
    base = _base(annotation)
    if isinstance(base, type) and issubclass(base, StrEnum):
        return next(iter(base)).value
    return {int: "1", float: "1", Path: "x.yaml"}.get(base, "x")


def _words(command, model, field: str, value: str) -> list[str]:
    flag = cli_flag(model, field)
    return [value] if flag.argument else [flag_of(model, field), value]


def _required(command, skip: str) -> list[str]:
    words = []
    for model in command.model_classes():
        for field, info in model.model_fields.items():
            if field != skip and info.is_required():
                filler = _filler(command.name, field, info.annotation)
                words += _words(command, model, field, filler)
    return words


def _typed_options():
    for command in TABLE:
        for model in command.model_classes():
            for field, info in model.model_fields.items():
                bad = _bad_value(info.annotation)
                if bad is not None:
                    yield pytest.param(command, model, field, bad,
                                       id=f"{command.name} {flag_of(model, field)} {bad}")


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_is_one_line_naming_it(run_cli, command):
    result = run_cli(command, "--no-such-option")
    assert_one_line_error(result, f"dis-serve {command}", "--no-such-option")


@pytest.mark.parametrize(("command", "model", "field", "bad"), list(_typed_options()))
def test_a_bad_value_is_one_line_naming_the_flag(run_cli, command, model, field, bad):
    result = run_cli(command.name, *_required(command, skip=field),
                     *_words(command, model, field, bad))
    assert_one_line_error(result, flag_of(model, field), bad)


@pytest.mark.parametrize("command", [c for c in TABLE if _required(c, skip="")],
                         ids=lambda c: c.name)
def test_a_missing_required_option_is_one_line(run_cli, command):
    assert_one_line_error(run_cli(command.name), f"dis-serve {command.name}", "Missing")


@pytest.mark.parametrize(("args", "flag"), [
    (("fault", "--duration", "nan"), "--duration"), (("top", "--window", "0"), "--window")])
def test_the_errors_issue_32_saw_in_four_lines_are_one(run_cli, args, flag):
    assert_one_line_error(run_cli(*args), flag, args[-1])
