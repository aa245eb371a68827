"""docs/topology.md is generated from the `Topology` model and checked in up to date."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field

from conftest import REPO
from dis_serve.render.schema_reference import (
    REGENERATE,
    TOPOLOGY_DOC,
    markdown_reference,
    topology_reference,
    with_factory_defaults,
)
from dis_serve.topology import Topology


class Colour(StrEnum):
    RED = "red"
    BLUE = "blue"


class Leaf(BaseModel):
    """A leaf section."""

    size: int = Field(default=3, ge=1, le=9, description="How big.")


class Root(BaseModel):
    """The top."""

    name: str = Field(description="Required name.")
    colour: Colour = Field(default=Colour.RED, description="Paint.")
    leaf: Leaf = Field(default_factory=Leaf, description="One leaf.")
    big_leaf: Leaf = Field(default_factory=lambda: Leaf(size=8), description="A bigger one.")
    leaves: list[Leaf] = Field(default_factory=list, description="More leaves.")


def root_reference() -> str:
    schema = with_factory_defaults(Root.model_json_schema(), Root)
    return markdown_reference(schema, title="Root", preamble="About it.")


def row(reference: str, key: str) -> str:
    return next(line for line in reference.splitlines() if line.startswith(f"| `{key}` |"))


def test_the_checked_in_reference_is_what_the_schema_generates(run_cli):
    result = run_cli("schema", "--markdown")
    assert result.exit_code == 0, result.stderr
    checked_in = (REPO / TOPOLOGY_DOC).read_text()
    assert checked_in == result.stdout, f"{TOPOLOGY_DOC} is stale; regenerate: {REGENERATE}"


def test_the_reference_has_a_row_for_every_field_of_every_section():
    reference = topology_reference()
    schema = Topology.model_json_schema()
    for name, section in [("Topology", schema), *schema["$defs"].items()]:
        if "properties" not in section:
            continue  # an enum: its values are listed where it is used
        assert f"\n## {name}\n" in reference
        body = reference.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for key in section["properties"]:
            assert f"| `{key}` |" in body, (name, key)


def test_a_nested_model_becomes_a_section_linked_from_its_paths():
    reference = root_reference()
    assert "## Leaf" in reference
    assert "At `leaf`, `big_leaf`, `leaves[]`." in reference
    assert "[Leaf](#leaf)" in row(reference, "leaf")


def test_an_enum_lists_its_values_and_shows_its_default():
    assert row(root_reference(), "colour") == (
        '| `colour` | one of `"red"`, `"blue"` | `"red"` | Paint. |')


def test_bounds_required_fields_and_factory_defaults_are_shown():
    reference = root_reference()
    assert row(reference, "size") == "| `size` | integer (>= 1, <= 9) | `3` | How big. |"
    assert "| required |" in row(reference, "name")
    assert "| `[]` |" in row(reference, "leaves")
    assert "| its section's defaults |" in row(reference, "leaf")


def test_a_section_default_that_differs_from_the_sections_own_names_the_difference():
    assert "its section's defaults, but `{\"size\": 8}`" in row(root_reference(), "big_leaf")
