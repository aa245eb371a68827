"""Give a topology another name and its own block of ports, so two copies run side by side.

Shared by the benchmarks and the tests (tests/conftest.py puts benchmarks/ on the path),
which run graphs beside each other and beside whatever else uses this machine's ports.
"""

from __future__ import annotations

from typing import Any

import yaml

from dis_serve.builtin import DEMO_TOPOLOGY

# frontend (or its balancer) base, etcd client/peer base+1/+2, NATS base+3 and its routes
# base+5, frontend replicas from base+6, worker system ports from base+10.
SYSTEM_PORT_OFFSET = 10
NATS_CLUSTER_OFFSET = 5
REPLICA_PORT_OFFSET = 6


def relocate(data: dict[str, Any], name: str, base: int) -> dict[str, Any]:
    """The topology mapping `data` renamed to `name` on ports base..base+10+workers."""
    moved = dict(data, name=name)
    moved["frontend"] = dict(data.get("frontend") or {}, port=base,
                             replica_port=base + REPLICA_PORT_OFFSET)
    coordination = dict(data.get("coordination") or {})
    coordination["etcd"] = dict(coordination.get("etcd") or {}, client_port=base + 1,
                                peer_port=base + 2)
    coordination["nats"] = dict(coordination.get("nats") or {}, port=base + 3,
                                cluster_port=base + NATS_CLUSTER_OFFSET)
    moved["coordination"] = coordination
    moved["observability"] = dict(data.get("observability") or {},
                                  system_port_base=base + SYSTEM_PORT_OFFSET)
    return moved


def relocated_demo(name: str, base: int) -> dict[str, Any]:
    """The built-in demo graph as `relocate` moves it."""
    return relocate(yaml.safe_load(DEMO_TOPOLOGY.read_text()), name, base)
