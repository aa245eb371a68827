"""`Topology`: the schema's root, with its cross-field rules applied."""

from __future__ import annotations

from pydantic import model_validator

from .rules import RULES
from .spec import TopologySpec


class Topology(TopologySpec):
    """One disaggregated (or aggregated) Dynamo serving graph."""

    @model_validator(mode="after")
    def _check(self) -> Topology:
        for rule in RULES:
            rule(self)
        return self
