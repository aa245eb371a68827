"""`dis-serve plan`: size prefill and decode pools for a model, workload and SLA.

`runner.run_plan(request, out_dir) -> PlanOutcome` runs the pipeline: request (what is
asked) -> model_choice (AIConfigurator's measured data, or the roofline) -> pools
(per-worker curves) -> predict (one deployment at one rate) -> search (candidates for the
objective) -> planner (verdict, savings) -> mocker_profile + replay (check in Dynamo's
replay) -> emit (topology YAML) -> report + plots (summaries, sentences, Pareto plot) ->
outcome (`plan.json`). Nothing heavy is imported here; the CLI draws the tables.
"""
