"""`dis-serve autoscaler RUN_DIR`: the deployment Dynamo's planner (`environment: virtual`)
scales, run by the graph's supervisor (the head node's agent) beside the planner.

Dynamo 1.6.1's planner writes each decision (`num_prefill_workers`, `num_decode_workers`,
`decision_id` under `v1/<namespace>/planner/` in etcd) and waits for the deployment to
acknowledge it. This process is that deployment, through Dynamo's own client of the protocol
(`VirtualConnectorClient`: wait, get, complete): it turns each decision into a target
topology (the running one with those worker counts, each pool between its min_workers and
its ceiling), carries it out with the same steps, drains and readiness rules as `scale`
(executor.py), and acknowledges it once done. It serves a `Scaler.generate` endpoint of its
own only so that its /health says when it is connected (DYN_SYSTEM_PORT).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from ..errors import DisServeError
from ..launch.change_record import change_lock
from ..topology import Mode, PoolRole, Topology
from .executor import LiveGraph, carry_out
from .targets import validated_counts


def decision_counts(topo: Topology, prefill: int, decode: int) -> dict[PoolRole, int]:
    """The planner's counts as pool counts (-1: no decision for that component; an
    aggregated pool is its decode component), each held to its pool's bounds."""
    wanted = ({PoolRole.AGG: decode} if topo.mode is Mode.AGG
              else {PoolRole.PREFILL: prefill, PoolRole.DECODE: decode})
    counts = {}
    for role, count in wanted.items():
        pool = topo.pools.get(role)
        assert pool is not None
        if count < 0:
            continue
        ceiling = topo.max_workers(role)
        counts[role] = max(pool.min_workers, min(count, ceiling or count))
    return counts


def carry_out_decision(live: LiveGraph, decision_id: int, prefill: int, decode: int,
                       say: Callable[[str], None] = print) -> None:
    running = live.read().topology
    counts = decision_counts(running, prefill, decode)
    target = validated_counts(running, counts)
    say(f"decision {decision_id}: " + ", ".join(f"{r.value} {n}" for r, n in counts.items()))
    start = time.monotonic()
    with change_lock(live.run_dir, running.name, wait=True):
        record = carry_out(live, target, f"planner (decision {decision_id})", say=say)
    say(f"decision {decision_id}: {record.message} after {time.monotonic() - start:.1f} s")


async def _serve(runtime: Any, live: LiveGraph, namespace: str) -> None:
    from dynamo._core import VirtualConnectorClient

    async def generate(_request: Any):
        yield "dis-serve scaler"

    endpoint = runtime.endpoint(f"{namespace}.Scaler.generate")
    serving = asyncio.ensure_future(endpoint.serve_endpoint(
        generate, health_check_payload={"text": "health"}))
    client = VirtualConnectorClient(runtime, namespace)
    print(f"carrying out Dynamo's planner's decisions (namespace {namespace})", flush=True)
    while not serving.done():
        await client.wait()
        decision = await client.get()
        try:
            await asyncio.to_thread(carry_out_decision, live, decision.decision_id,
                                    decision.num_prefill_workers, decision.num_decode_workers,
                                    lambda line: print(line, flush=True))
        except DisServeError as exc:  # the record says it too; the planner is told done
            print(f"decision {decision.decision_id} not carried out in full: {exc}",
                  flush=True)
        await client.complete(decision)
    await serving


def run_autoscaler(live: LiveGraph, namespace: str) -> None:
    """Until SIGTERM (the supervisor stops it first, before the frontend)."""
    from dynamo.runtime import dynamo_worker

    @dynamo_worker()
    async def main(runtime: Any) -> None:
        await _serve(runtime, live, namespace)

    asyncio.run(main())  # type: ignore[call-arg]
