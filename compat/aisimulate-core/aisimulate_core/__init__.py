"""The part of AISimulate's `aisimulate_core` that Dynamo 1.6.1's planner imports, on top of
AIConfigurator's core, which AISimulate was renamed from (see sdk/__init__.py)."""
