"""`dis-serve plan`: size prefill and decode pools for a model, workload and SLA.

`pipeline.run_plan(request, out_dir) -> PlanOutcome` runs it end to end: request (what is
asked, and how each field is spelled as a flag) -> model_choice (AIConfigurator's measured
data, or the roofline) -> pools (per-worker curves) -> predict (one deployment at one rate)
-> search (candidates for the objective) -> recommend (the plan, its verdict and savings) ->
mocker_profile + replay + verify (check it in Dynamo's replay, backing off) -> emit (topology
YAML) -> to_outcome + plots (`plan.json`'s models and sentences, the Pareto plot).
vs_measured sets a `bench` of a planned graph beside its plan. Nothing heavy is imported
here; the CLI draws the tables.
"""
