"""Fault injection against a running graph: scenarios, injector, analysis, runner."""
