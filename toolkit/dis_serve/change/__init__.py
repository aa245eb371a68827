"""Changing a running graph (`scale`, `apply`, Dynamo's planner): what an edited topology
changes (diff), the next step toward a target (steps), carrying steps out through a
placement's live view of the graph (executor), and the change's record (record)."""
