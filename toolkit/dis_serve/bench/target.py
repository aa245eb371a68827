"""What a benchmark runs against: endpoint, served model, tokenizer, GPU count, metrics URLs.

The GPU count always comes from a topology (the one brought up, or the one `--url` is said
to run), never from a flag. Before any AIPerf run the endpoint is asked for its models, so a
graph that is down or serves another model fails in one line instead of in AIPerf's log.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import RunError, UserInputError
from ..render.launch_plan import LaunchPlan, RenderContext, render_launch_plan
from ..render.metrics_endpoints import MetricsEndpoint, graph_endpoints
from ..security.http_client import direct_client
from ..security.pki_files import EndpointTls
from ..topology import Topology


@dataclass(frozen=True)
class BenchTarget:
    url: str
    model: str
    tokenizer: str
    gpus: int
    gpu_type: str
    topology_name: str
    topology_file: str | None
    topology_digest: str
    endpoints: tuple[MetricsEndpoint, ...]
    tls: EndpointTls | None = None  # an https frontend: the graph's CA (and client cert)

    @property
    def worker_metrics_urls(self) -> tuple[str, ...]:
        # AIPerf scrapes the frontend (URL + /metrics) on its own.
        return tuple(e.url for e in self.endpoints if e.pool != "frontend")


def make_target(topo: Topology, *, url: str, plan: LaunchPlan, tokenizer: str,
                topology_file: Path | None) -> BenchTarget:
    url = url.rstrip("/")
    return BenchTarget(
        url=url, model=plan.model_name, tokenizer=tokenizer, gpus=topo.total_gpus,
        gpu_type=topo.hardware.gpu.value, topology_name=topo.name,
        topology_file=str(topology_file) if topology_file else None,
        topology_digest=topo.digest,
        endpoints=tuple(graph_endpoints(plan, url)), tls=tls_for(url, plan))


def tls_for(url: str, plan: LaunchPlan) -> EndpointTls | None:
    """The plan's TLS for an https `url` (its own endpoint, or the same graph by another of
    its names) when its CA is on this machine; nothing for plain HTTP. A graph started
    elsewhere has no CA here: its certificate must then chain to one this machine trusts."""
    tls = plan.endpoint_tls if url.startswith("https://") else None
    return tls if tls is not None and Path(tls.ca_cert).is_file() else None


def plan_of(topo: Topology) -> LaunchPlan:
    """The launch plan the graph runs (served model name, worker ports, model card path): the
    one `dis-serve up` wrote to its run directory for this topology, read back; rendered
    only for a graph started elsewhere (another directory or machine), which has none here."""
    from ..launch.rundir import RunDir

    run = RunDir.for_graph(topo.name)
    recorded = run.plan_rendered_from(topo)
    if recorded is not None:
        return recorded
    return render_launch_plan(topo, RenderContext(run_dir=run.path))


def resolve_tokenizer(topo: Topology, plan: LaunchPlan, explicit: str | None) -> str:
    """The tokenizer AIPerf counts tokens with: the flag, else the running graph's model
    directory, else (mocker) the same tokenizer-only card the launcher writes, else the id."""
    if explicit:
        return explicit
    if Path(plan.model_path).is_dir():
        return plan.model_path
    if plan.needs_model_card:
        from ..launch.model_card import write_model_card
        from ..launch.rundir import default_root

        card = default_root() / "tokenizers" / topo.name
        write_model_card(card, topo.model.resolved_architecture(), name=topo.model.id)
        return str(card)
    return topo.model.id


def check_endpoint(url: str, model: str, *, topology_file: str | None = None,
                   timeout_s: float = 5.0, tls: EndpointTls | None = None) -> None:
    """One-line errors for an endpoint that is down or does not serve `model`."""
    import httpx

    try:
        with direct_client(timeout_s, tls=tls) as client:
            response = client.get(f"{url}/v1/models")
    except httpx.HTTPError as exc:
        raise RunError(f"cannot reach {url} ({type(exc).__name__}: {exc or 'no answer'}); "
                       "start the graph (`dis-serve up`) or check --url") from None
    if response.status_code != 200:
        raise RunError(f"{url}/v1/models answered HTTP {response.status_code}; is this an "
                       "OpenAI-compatible frontend?")
    try:
        served = [m["id"] for m in response.json().get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        raise RunError(f"{url}/v1/models did not answer an OpenAI model list") from None
    if model not in served:
        listed = ", ".join(served) or "no models (workers not registered yet?)"
        raise UserInputError(
            f"{url} does not serve model '{model}'; it serves: {listed}",
            source=topology_file, key="model.served_name",
            fix="bench the topology that graph runs (--topology FILE)")
