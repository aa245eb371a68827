"""The base of every command's request model (inputs/options.py reads its fields as flags)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class RequestModel(BaseModel):
    """Unknown fields are errors, a request does not change once made, and inf or nan is no
    count, rate or number of seconds: refused where it is given, not deep in a run."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
