"""Each pool's max_workers, told to Dynamo 1.6.1's planner through its own plugin pipeline:
an in-process `constrain` plugin (`plugin_registration.in_process_plugins` in the planner's
config) that holds each component AT_MOST its ceiling. The planner bounds only the total by
itself (max_gpu_budget); a decision dis-serve could not carry out in full would leave it
waiting for a worker count discovery never shows (connectors/virtual.py: "stable" needs the
counts to match), so the ceiling is the planner's to keep, not the scaler's.

Imported by the planner process (`dynamo.planner` loads it by module and class name), never
by dis-serve itself.
"""

from __future__ import annotations

from typing import Any

PLUGIN_ID = "dis_serve_pool_ceilings"


class PoolCeilings:
    """`prefill` and `decode` (an aggregated pool is the planner's decode component): the
    most workers each may have; None: no ceiling."""

    def __init__(self, prefill: int | None = None, decode: int | None = None) -> None:
        self.ceilings = {"prefill": prefill, "decode": decode}

    async def Constrain(self, _request: Any) -> Any:
        from dynamo.planner.plugins.types import (
            ComponentTarget,
            ConstrainStageResponse,
            OverrideResult,
            OverrideType,
        )

        targets = [ComponentTarget(sub_component_type=component, replicas=ceiling,
                                   type=OverrideType.AT_MOST)
                   for component, ceiling in self.ceilings.items() if ceiling is not None]
        return ConstrainStageResponse(override=OverrideResult(
            targets=targets, reason="dis-serve: pools' max_workers"))


def plugin_entry(prefill: int | None, decode: int | None) -> dict[str, Any]:
    """The planner config's `in_process_plugins` entry."""
    return {"module": __name__, "class": PoolCeilings.__name__, "plugin_id": PLUGIN_ID,
            "plugin_type": "constrain", "priority": 100,
            "kwargs": {"prefill": prefill, "decode": decode}}
