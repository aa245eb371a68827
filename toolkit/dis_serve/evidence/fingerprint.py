"""A run's fingerprint: everything that produced an output directory (`bench`, `compare`,
`chaos`, `plan`), written beside its results as `fingerprint.json` so two runs can be diffed
(`dis-serve diff`) and a result re-created: dis-serve's version and the packages around it,
the topology file's git commit and dirty state, the topology's and each engine config's hash,
the settings flattened to `key.path: value`, the model and its revision, the host (CPU,
memory, GPUs and driver) and the environment with secrets redacted.

`capture` reads the machine; everything else here is pure.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..engines import engine_distributions, engine_for
from ..files.atomic_file import write_atomic
from ..topology import Topology
from .machine import HostEvidence, observe_host

FINGERPRINT_FILE = "fingerprint.json"
SCHEMA_VERSION = 1
REDACTED = "<redacted>"
# Distributions whose versions decide what a run measured, where installed (each engine's
# own from its module, engines/).
PACKAGES = ("ai-dynamo", "ai-dynamo-runtime", "aiperf", "aiconfigurator", "aiconfigurator-core",
            *engine_distributions(), "torch", "nixl", "transformers", "pydantic")
# An environment variable whose name says it holds a secret, and a URL's password.
SECRET_NAME = re.compile(r"TOKEN|PASSW|SECRET|KEY|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION|NKEY"
                         , re.IGNORECASE)
URL_PASSWORD = re.compile(r"(?P<head>[a-z][a-z0-9+.-]*://[^/:@\s]+:)[^@\s/]+@", re.IGNORECASE)
_GIT_TIMEOUT_S = 5.0

Scalar = str | int | float | bool | None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SourceFile(_Frozen):
    """A file an output was made from, pinned by content and, where it is tracked, by git."""

    path: str
    sha256: str
    git_commit: str | None = Field(description="HEAD of the repository holding the file.")
    git_dirty: bool | None = Field(
        description="The file differs from HEAD or is not tracked (None: not in a repository).")


class ModelEvidence(_Frozen):
    id: str
    served_name: str
    revision: str | None = Field(
        description="The Hugging Face revision: the commit model.revision pins, else the "
                    "local hub cache's commit for it (refs/main), else model.revision itself.")


class TopologyEvidence(_Frozen):
    name: str
    file: SourceFile | None
    digest: str = Field(description="Hash of the validated topology (defaults filled in).")
    engine_configs: dict[str, str] = Field(
        default_factory=dict, description="Pool role -> sha256 of its rendered engine config.")
    model: ModelEvidence
    settings: dict[str, Scalar] = Field(description="Every setting, as `key.path: value`.")


class Fingerprint(_Frozen):
    """What produced one output directory."""

    schema_version: int = SCHEMA_VERSION
    command: str = Field(description="bench | compare | chaos | plan.")
    created_at: str = Field(description="UTC time of capture, ISO 8601.")
    dis_serve_version: str
    python: str
    packages: dict[str, str] = Field(description="Distribution -> version, where installed.")
    host: HostEvidence
    topologies: dict[str, TopologyEvidence] = Field(
        description="The topologies run: `topology` for bench and chaos, each arm for compare.")
    inputs: dict[str, Scalar] = Field(
        default_factory=dict,
        description="The scenario (bench, compare, chaos) or plan request, as `key.path: value`.")
    input_files: dict[str, SourceFile] = Field(default_factory=dict)
    environment: dict[str, str] = Field(description="The process environment, secrets redacted.")


# --- pure parts ------------------------------------------------------------------------------
def flatten(data: Any, prefix: str = "") -> dict[str, Scalar]:
    """Nested dicts as `a.b.c: value`; a list stays one value (its JSON-like text)."""
    if isinstance(data, Mapping):
        flat: dict[str, Scalar] = {}
        for key, value in data.items():
            flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(data, list | tuple):
        return {prefix: redact_value(repr(list(data)))}
    if isinstance(data, str):
        return {prefix: redact_value(data)}
    return {prefix: data}


def redact_value(value: str) -> str:
    """The text with the password of any URL in it replaced (user names stay)."""
    return URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED + "@", value)


def redact_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment with every variable whose name looks secret blanked, and URL
    passwords removed from the rest."""
    return {name: REDACTED if SECRET_NAME.search(name) else redact_value(value)
            for name, value in sorted(env.items())}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def topology_evidence(topo: Topology, file: SourceFile | None,
                      revision: str | None) -> TopologyEvidence:
    from ..render.engine_config import dump_engine_config, render_engine_configs

    pinned = topo.model.pinned_revision
    engine_configs = {}
    if engine_for(topo.backend).uses_engine_config:
        engine_configs = {role.value: sha256_text(dump_engine_config(config))
                          for role, config in render_engine_configs(topo).items()}
    return TopologyEvidence(
        name=topo.name, file=file, digest=topo.digest, engine_configs=engine_configs,
        model=ModelEvidence(id=topo.model.id, served_name=topo.model.name,
                            revision=pinned or revision or topo.model.revision),
        settings=flatten(topo.model_dump(mode="json")))


# --- reading the machine ---------------------------------------------------------------------
def _git(directory: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              text=True, timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def source_file(path: Path) -> SourceFile:
    path = path.resolve()
    commit = _git(path.parent, "rev-parse", "HEAD")
    dirty = None
    if commit is not None:
        # Porcelain lists the file when it is modified, staged or untracked; nothing if clean.
        status = _git(path.parent, "status", "--porcelain", "--", path.name)
        dirty = None if status is None else bool(status.strip())
    return SourceFile(path=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                      git_commit=commit.strip() if commit else None, git_dirty=dirty)


def hub_revision(model_id: str) -> str | None:
    """The commit the local Hugging Face cache holds for `model_id` (refs/main)."""
    if Path(model_id).exists() or "/" not in model_id:
        return None
    home = Path(os.environ.get("HF_HUB_CACHE") or Path(
        os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub")
    ref = home / ("models--" + model_id.replace("/", "--")) / "refs" / "main"
    try:
        return ref.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def capture(command: str, topologies: Mapping[str, tuple[Topology, Path | None]],
            inputs: BaseModel | None = None,
            input_files: Mapping[str, Path] | None = None) -> Fingerprint:
    """Observe everything about this run now."""
    from .. import __version__

    evidence = {
        label: topology_evidence(topo, source_file(path) if path and path.is_file() else None,
                                 hub_revision(topo.model.id))
        for label, (topo, path) in topologies.items()}
    return Fingerprint(
        command=command, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        dis_serve_version=__version__, python=sys.version.split()[0],
        packages=package_versions(), host=observe_host(), topologies=evidence,
        inputs=flatten(inputs.model_dump(mode="json")) if inputs is not None else {},
        input_files={label: source_file(path) for label, path in (input_files or {}).items()
                     if path.is_file()},
        environment=redact_environment(os.environ))


def write_fingerprint(out_dir: Path, fingerprint: Fingerprint) -> Path:
    path = out_dir / FINGERPRINT_FILE
    out_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(path, fingerprint.model_dump_json(indent=2))
    return path


def read_fingerprint(path: Path) -> Fingerprint:
    return Fingerprint.model_validate_json(path.read_text(encoding="utf-8"))
