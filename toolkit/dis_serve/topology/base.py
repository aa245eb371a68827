"""What every topology section shares: the strict base model, ports, the graph-name rule."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Unknown keys are errors (with a "did you mean" from yaml_input), defaults are validated."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, validate_default=True)


Port = Annotated[int, Field(ge=1, le=65535)]
MAX_SYSTEM_PORT = 32767
# Graph and scenario names become Kubernetes names, namespaces and directory names. Always
# matched whole (re.fullmatch): `$` would also match before a trailing newline.
NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,38}[a-z0-9]")


def is_valid_name(name: str) -> bool:
    """The rule for graph and scenario names, matched against the whole name."""
    return NAME_RE.fullmatch(name) is not None

