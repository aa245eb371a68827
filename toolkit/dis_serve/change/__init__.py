"""Changing a running graph (`scale`, `apply`, Dynamo's planner): what an edited topology
changes (diff), the target of `scale` (targets), the next step toward a target (steps),
carrying steps out through a placement's live view of the graph (executor), and `scale` and
`apply` as the CLI runs them (commands); the change's record is launch/change_record.py."""
