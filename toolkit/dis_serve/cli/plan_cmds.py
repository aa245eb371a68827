"""`plan`: size prefill and decode pools for a model, workload and SLA, and emit the graph."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ..errors import UserInputError

console = Console(highlight=False, soft_wrap=True)


def _split(value: str | None) -> tuple[int, int] | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\d+):(\d+)", value.strip())
    if not match or 0 in (int(match[1]), int(match[2])):
        raise UserInputError(f"{value!r} is not PREFILL:DECODE GPUs", key="--compare-split",
                             fix="e.g. --compare-split 8:40")
    return int(match[1]), int(match[2])


def plan(
    model: Annotated[str, typer.Option(help="llama-3.1-70b, llama-3.1-8b, qwen3-32b (or "
                                            "their Hugging Face ids).")],
    ttft_ms: Annotated[float, typer.Option(help="SLA: 90th-percentile time to first token.")],
    itl_ms: Annotated[float, typer.Option(help="SLA: 90th percentile of requests' mean "
                                               "inter-token latency.")],
    gpu: Annotated[str, typer.Option(help="h100-sxm, h200, a100-80gb, l40s, l4.")] = "h100-sxm",
    isl: Annotated[int | None, typer.Option(help="Prompt tokens per request.")] = None,
    osl: Annotated[int | None, typer.Option(help="Output tokens per request.")] = None,
    trace: Annotated[Path | None, typer.Option(
        help="Mooncake JSONL trace instead of --isl/--osl (its mean lengths are planned for, "
             "its timestamps give the rate, the replay replays it).")] = None,
    rate: Annotated[float | None, typer.Option(
        help="Objective (a): serve this many requests/s on the fewest GPUs.")] = None,
    budget: Annotated[int | None, typer.Option(
        help="Objective (b): most goodput from this many GPUs.")] = None,
    price: Annotated[float | None, typer.Option(
        help="USD per GPU-hour (default: the catalog's list price).")] = None,
    dtype: Annotated[str, typer.Option(help="Weights: bf16, fp8, int8, awq.")] = "bf16",
    kv_cache_dtype: Annotated[str, typer.Option(help="KV cache: bf16, fp8.")] = "bf16",
    gpus_per_node: Annotated[int, typer.Option(help="GPUs per node.")] = 8,
    perf_model: Annotated[str | None, typer.Option(
        help="Force aiconfigurator or roofline (default: AIConfigurator where it has data).")
    ] = None,
    top: Annotated[int, typer.Option(help="Rows per table.")] = 5,
    compare_split: Annotated[str | None, typer.Option(
        help="Also evaluate a fixed PREFILL:DECODE GPU split, e.g. 8:40.")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Directory for plan.json, pareto.png, topologies and the mocker profile "
             "(default: .dis-serve/plans/NAME).")] = None,
    emit: Annotated[Path | None, typer.Option(
        help="Also write the chosen topology here (the mocker graph with --mock).")] = None,
    mock: Annotated[bool, typer.Option(
        help="--emit writes the mocker graph timed like the planned GPUs.")] = False,
    replay: Annotated[bool, typer.Option(
        help="Check the plan in Dynamo's virtual-clock replay.")] = True,
    autoscale: Annotated[bool, typer.Option(
        help="Give the trtllm topology an `autoscale` section: on Kubernetes Dynamo's SLA "
             "planner then holds the SLA within the planned GPUs.")] = False,
    replay_requests: Annotated[int | None, typer.Option(
        help="Requests to replay (default: enough for a steady state, at least 2000).")
    ] = None,
) -> None:
    """Size prefill/decode (or aggregated) pools from measured H100 data, check the plan in
    Dynamo's replay, price it and write it as a topology."""
    from ..plan.emit import graph_name, plan_topology, write_topology
    from ..plan.mocker_profile import profile_tables, write_profile
    from ..plan.planner import make_plan
    from ..plan.replay import replay_plan
    from ..plan.report import pareto_png, plan_dict, print_plan
    from ..plan.request import build_request

    if not console.is_terminal:  # logs and CI: wide enough for the tables
        console.width = max(console.width, 120)
    request = build_request(
        model=model, gpu=gpu, isl=isl, osl=osl, trace=trace, rate=rate, budget=budget,
        ttft_ms=ttft_ms, itl_ms=itl_ms, price_per_gpu_hour=price, dtype=dtype,
        kv_cache_dtype=kv_cache_dtype, gpus_per_node=gpus_per_node, perf_model=perf_model,
        top=top, autoscale=autoscale)
    result = make_plan(request, split=_split(compare_split))
    chosen = result.chosen
    out_dir = (out or Path(".dis-serve/plans") / graph_name(request, chosen, False)).resolve()
    seq_len = result.space.seq_len
    profile = write_profile(profile_tables(result.model, chosen, result.workload.isl, seq_len),
                            out_dir / "mocker-profile.npz")
    header = (f"Planned by `dis-serve plan` with {result.model.source.value}: "
              f"{chosen.label}.\nPredicted: {chosen.rate:.2f} req/s, p90 TTFT "
              f"{chosen.prediction.ttft_p90_ms:.0f} ms, p90 ITL "
              f"{chosen.prediction.itl_p90_ms:.1f} ms.")
    files = {
        "topology (trtllm)": write_topology(plan_topology(chosen, request, result.workload),
                                            out_dir / "topology.yaml", header),
        "topology (mocker)": write_topology(
            plan_topology(chosen, request, result.workload, mock=True, profile=profile),
            out_dir / "topology-mock.yaml",
            header + "\nThe mocker times itself from mocker-profile.npz (the same model)."),
        "mocker profile": profile,
    }
    replays = []
    if replay:
        checks = [("plan", chosen)]
        if result.split is not None:
            checks.append(("split", result.split))
        for name, cand in checks:
            cand_profile = profile if cand is chosen else write_profile(
                profile_tables(result.model, cand, result.workload.isl, seq_len),
                out_dir / f"mocker-profile-{name}.npz")
            replays.append((name, cand, replay_plan(
                request.target(), cand, cand_profile, result.workload,
                ttft_sla_ms=request.ttft_ms, itl_sla_ms=request.itl_ms,
                requests=replay_requests, gpus_per_node=request.gpus_per_node)))
    files["Pareto plot"] = pareto_png(result, out_dir / "pareto.png")
    if emit is not None:
        chosen_file = files["topology (mocker)" if mock else "topology (trtllm)"]
        emit.parent.mkdir(parents=True, exist_ok=True)
        text = chosen_file.read_text()
        emit.write_text(text)
        files["emitted topology"] = emit.resolve()
    files["plan.json"] = out_dir / "plan.json"
    files["plan.json"].write_text(json.dumps(plan_dict(result, replays, files), indent=2) + "\n")
    print_plan(result, console, replays=replays, files=files)
    target = files.get("emitted topology", files["topology (mocker)"])
    console.print(f"next: dis-serve validate {target} && dis-serve up {target}", markup=False)


def register(app: typer.Typer) -> None:
    """Add this group's commands to the app."""
    app.command()(plan)
