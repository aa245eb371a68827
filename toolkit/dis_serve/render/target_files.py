"""All render targets as files: relative path -> text, with what to know before using them.
Pure; `write_files` is the only writer."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import yaml

from ..engines import engine_for
from ..startup_budget import readiness_timeout_s
from ..topology import Topology
from .engine_config import dump_engine_config, engine_config_path, render_engine_configs
from .hosts import render_hosts_files
from .k8s import apply_prerequisites, apply_warnings, operator_notes, render_manifests
from .k8s_monitor import monitor_notes, pod_monitor_file, render_pod_monitors
from .launch_plan import RenderContext, render_launch_plan
from .shell_script import render_shell_script
from .slurm import render_sbatch_script


class _ManifestDumper(yaml.SafeDumper):
    """Multi-line strings (engine configs inside the ConfigMap) as readable `|` blocks."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_ManifestDumper.add_representer(str, _represent_str)


def dump_manifests(docs: list[dict], notes: list[str] = (),
                   heading: str = "What Dynamo's operator does with these manifests:") -> str:
    """The documents as one multi-document YAML file, `notes` under `heading` as its leading
    comment."""
    header = "".join(textwrap.fill(note, width=98, initial_indent="# - ",
                                   subsequent_indent="#   ", break_on_hyphens=False,
                                   break_long_words=False) + "\n" for note in notes)
    if header:
        header = f"# {heading}\n" + header
    return header + yaml.dump_all(docs, Dumper=_ManifestDumper, sort_keys=False,
                                  default_flow_style=False)


class Target(StrEnum):
    LOCAL = "local"
    K8S = "k8s"
    HOSTS = "hosts"
    SLURM = "slurm"
    ALL = "all"

    def includes(self, other: Target) -> bool:
        return self is other or self is Target.ALL

    def wanted(self, other: Target, topo: Topology) -> bool:
        """Whether `render` writes `other` for this choice: `all` adds the cluster targets
        (hosts, Slurm) only for graphs on more than one node."""
        if other in (Target.HOSTS, Target.SLURM) and self is Target.ALL:
            return topo.placement.kind.multi_node or topo.hardware.nodes > 1
        return self.includes(other)


def _engine_config_files(topo: Topology, directory: str) -> dict[str, str]:
    if not engine_for(topo.backend).uses_engine_config:
        return {}
    return {str(engine_config_path(Path(directory), role)): dump_engine_config(config)
            for role, config in render_engine_configs(topo).items()}


def render_files(topo: Topology, target: Target, out_dir: Path) -> dict[str, str]:
    """Everything `render` writes. Paths inside the local plan point into out_dir/local so
    the rendered script runs as written."""
    files: dict[str, str] = {}
    if target.includes(Target.LOCAL):
        local = out_dir / "local"
        plan = render_launch_plan(topo, RenderContext(run_dir=local))
        files["local/launch-plan.json"] = plan.model_dump_json(indent=2) + "\n"
        files["local/launch.sh"] = render_shell_script(
            plan, ready_timeout_s=readiness_timeout_s(topo))
        files |= _engine_config_files(topo, "local")
    if target.includes(Target.K8S):
        files["k8s/deployment.yaml"] = dump_manifests(render_manifests(topo),
                                                      operator_notes(topo))
        files[pod_monitor_file(topo)] = dump_manifests(
            render_pod_monitors(topo), monitor_notes(topo),
            heading="The graph's PodMonitors, for a Prometheus Operator:")
    if target.wanted(Target.HOSTS, topo):
        files |= {f"hosts/{name}": text for name, text in render_hosts_files(topo).items()}
        files |= _engine_config_files(topo, "hosts")
    if target.wanted(Target.SLURM, topo):
        files["slurm/job.sbatch"] = render_sbatch_script(topo)
        files |= _engine_config_files(topo, "slurm")
    files["topology.json"] = json.dumps(topo.model_dump(mode="json"), indent=2) + "\n"
    return files


@dataclass(frozen=True)
class RenderResult:
    files: dict[str, str]
    warnings: list[str] = field(default_factory=list)
    first_steps: list[str] = field(
        default_factory=list)  # commands to run before the files can be used


def render_target(topo: Topology, target: Target, out_dir: Path,
                  source: str | None = None) -> RenderResult:
    """`render_files` with the checks of each target: UserInputError (naming `source`) for
    what the target cannot use at all, warnings and first steps for the rest."""
    warnings: list[str] = []
    first: list[str] = []
    files = render_files(topo, target, out_dir)
    if target.includes(Target.K8S):
        from ..errors import UserInputError
        from .model_cache import claim_check, local_path_problem

        if (problem := local_path_problem(topo)) is not None:
            raise UserInputError(problem, source=source, key="model.id")
        if (problem := claim_check(topo)[0]) is not None:
            raise UserInputError(problem, source=source)
        warnings += apply_warnings(topo)
        first += apply_prerequisites(topo)
        files |= _tls_secrets_file(topo, out_dir)
    return RenderResult(files=files, warnings=warnings, first_steps=first)


def _tls_secrets_file(topo: Topology, out_dir: Path) -> dict[str, str]:
    """k8s/tls-secrets.yaml where the graph's Secrets are dis-serve's: the one rendered file
    made with fresh keys, kept from the last render while its certificates still fit."""
    from .k8s_secrets import SECRETS_FILE, secrets_notes, tls_secret_docs

    path = out_dir / SECRETS_FILE
    previous = path.read_text() if path.is_file() else None
    docs = tls_secret_docs(topo, previous)
    if not docs:
        return {}
    return {SECRETS_FILE: dump_manifests(docs, secrets_notes(topo),
                                         heading="What this file holds:")}


def write_files(files: dict[str, str], out_dir: Path) -> list[Path]:
    written = []
    for relative, text in sorted(files.items()):
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        # The owner's alone (the scripts hold paths, the topology its settings): 0700 / 0600.
        path.chmod(0o700 if path.suffix in (".sh", ".sbatch") else 0o600)
        written.append(path)
    return written
