"""`dis-serve plan`: size prefill and decode pools for a model, workload and SLA.

request (what is asked) -> perf_model (AIConfigurator's measured data, or the roofline) ->
pools (per-worker curves) -> predict (one deployment at one rate) -> search (candidates for
the objective) -> planner (verdict, savings) -> mocker_profile + replay (check in Dynamo's
replay) -> emit (topology YAML) -> report (tables, Pareto plot, plan.json).
Nothing heavy is imported here; the CLI imports what it uses inside the command.
"""
