"""Typer commands built from the command table (`inputs/options.Command`): each request
model's fields become the command's options, and its values go to the models as typed.

Values reach the models as text (numbers, paths and choices alike), so the models' own
validation is the only one and its error is one line naming the flag; Typer parses only the
shape of the command line (which flags, how many arguments), and what it refuses `main`
shows as one line too.

Typer itself is imported inside the functions: `cli/app.py` imports this module before
`main` can catch a Ctrl-C. A command's options are built when it runs, not when the app
starts: that imports pydantic and the models, which `dis-serve --help` and every other
command would otherwise pay for. The app holds a stand-in per command that takes its
arguments as they come and hands them to the command built from the models, `--help`
included.
"""

from __future__ import annotations

import inspect
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Annotated, Any, Union, get_args, get_origin

if TYPE_CHECKING:
    import typer
    from pydantic import BaseModel

    from ..inputs.options import Command

# What the help shows for a value given as text: what the model reads it as (Typer's words).
METAVARS = {int: "<int>", float: "<float>", Path: "<path>", str: "<str>"}
BOUNDS = (("ge", "{}<="), ("gt", "{}<"), ("le", "<={}"), ("lt", "<{}"))
PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                "help_option_names": []}


def help_paragraphs(docstring: str) -> str:
    """A command's docstring as `--help` text: its paragraphs with the source's line breaks
    undone. Typer's Rich help keeps single newlines as they are (and the command list shows
    them verbatim), so a docstring wrapped at 100 columns in the source would break lines
    mid-sentence at any other width; Rich rewraps each paragraph to the terminal instead."""
    return "\n\n".join(" ".join(paragraph.split())
                       for paragraph in inspect.cleandoc(docstring).split("\n\n"))


def add_command(app: typer.Typer, command: Command) -> None:
    """The stand-in for `command` in `app`: its name, its summary, and the real command
    (from the models) run on whatever arguments it was given."""
    import typer

    def stand_in(ctx) -> None:  # typer.Context: annotated below, as Typer reads it
        real = typer.main.get_command(_models_app(command))
        code = real.main(args=ctx.args, prog_name=ctx.command_path, standalone_mode=False)
        if isinstance(code, int) and code:
            raise typer.Exit(code)

    stand_in.__doc__ = command.run.__doc__
    stand_in.__annotations__ = {"ctx": typer.Context, "return": None}
    app.command(name=command.name, hidden=command.hidden, context_settings=PASS_THROUGH,
                add_help_option=False)(stand_in)


def _models_app(command: Command) -> typer.Typer:
    import typer

    from ..errors import UserInputError
    from ..inputs.options import in_flags, parse_values

    models = command.model_classes()

    def run(**values: object) -> None:
        try:
            requests = [parse_values(m, {f: values[f] for f in m.model_fields})
                        for m in models]
            command.function()(*requests)
        except UserInputError as exc:
            raise in_flags(models, exc) from None

    run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [_parameter(model, field) for model in models for field in model.model_fields])
    app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    app.command(name=command.name, help=help_paragraphs(command.run.__doc__ or ""))(run)
    return app


def _parameter(model: type[BaseModel], field: str) -> inspect.Parameter:
    """`model.field` as a Typer option (or argument): its flag, its description as help
    (choices listed from its enum), its default; the value is passed on as given."""
    import typer

    from ..inputs.options import cli_flag, flag_of, flags_in

    info, flag = model.model_fields[field], cli_flag(model, field)
    base = _base_type(info.annotation)
    default = inspect.Parameter.empty if info.is_required() else info.get_default(
        call_default_factory=True)
    help_text = flags_in([model], info.description) or ""
    kind: Any = Path if base is Path else str  # a path cannot fail to parse: Typer shows it
    metavar = flag.metavar or _metavar(base, info.metadata)
    if base is bool:
        kind, metavar = bool, None
    elif isinstance(base, type) and issubclass(base, StrEnum):
        help_text += " One of: " + ", ".join(m.value for m in base) + "."
        default = default.value if isinstance(default, StrEnum) else default
    elif get_origin(base) is tuple and get_args(base)[-1] is Ellipsis:  # repeatable
        item = get_args(base)[0]
        kind = list[Path] if item is Path else list[str]
        metavar = flag.metavar or _metavar(item, ())
        default = default if info.is_required() else None
    if isinstance(default, Path | int | float) and not isinstance(default, bool):
        default = str(default)
    if flag.argument:
        spec = typer.Argument(help=help_text, metavar=flag.metavar or field.upper(),
                              show_default=default not in (None, inspect.Parameter.empty))
    else:
        spec = typer.Option(*_names(flag_of(model, field), flag, kind), help=help_text,
                            metavar=metavar)
    optional = default is None or get_origin(kind) is list
    return inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind | None if optional else kind, spec])


def _names(name: str, flag: Any, kind: Any) -> tuple[str, ...]:
    if kind is bool and flag.negatable:
        name = f"{name}/--no-{name.removeprefix('--')}"
    return (name, flag.short) if flag.short else (name,)


def _metavar(base: object, metadata: list[object] | tuple[()]) -> str | None:
    """`<float>`, with the field's bounds as Typer shows a range: `<float> [0.5<=x<=600]`."""
    name = METAVARS.get(base)  # type: ignore[call-overload]
    low = [form.format(getattr(m, key)) for m in metadata for key, form in BOUNDS[:2]
           if getattr(m, key, None) is not None]
    high = [form.format(getattr(m, key)) for m in metadata for key, form in BOUNDS[2:]
            if getattr(m, key, None) is not None]
    if name is None or not (low or high):
        return name
    return f"{name} [{''.join(low[:1])}x{''.join(high[:1])}]"


def _base_type(annotation: object) -> object:
    """`X` of `X | None` (and of `Annotated[X, ...]`)."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    if get_origin(annotation) in (UnionType, Union) and len(args) == 1:
        annotation = args[0]
    return get_args(annotation)[0] if get_origin(annotation) is Annotated else annotation
