"""Two runs compared: what differs in what produced them (configuration, versions, hardware,
environment) and, for benchmark runs, their results side by side with the change.

Pure: reads two output directories' `fingerprint.json` (and `results.json` where both have
one) and returns rows; the CLI prints them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from ..errors import UserInputError
from ..evidence.fingerprint import (
    FINGERPRINT_FILE,
    Fingerprint,
    Scalar,
    TopologyEvidence,
    read_fingerprint,
)

RESULTS_FILE = "results.json"  # bench's report writes it (bench/report.RESULTS_JSON)


class Category(StrEnum):
    """What kind of thing differs; the order is the order `diff` prints them in."""

    CONFIGURATION = "configuration"  # topology settings, scenario / plan request
    DERIVED = "derived"  # hashes and files that follow from the configuration
    VERSIONS = "versions"
    HARDWARE = "hardware"
    ENVIRONMENT = "environment"


@dataclass(frozen=True)
class Difference:
    category: Category
    key: str
    a: Scalar
    b: Scalar


@dataclass(frozen=True)
class ResultRow:
    load: str
    metric: str
    unit: str
    a: float | None
    b: float | None

    @property
    def change_pct(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return 100.0 * (self.b - self.a) / self.a


def _compare(category: Category, a: dict[str, Scalar], b: dict[str, Scalar],
             prefix: str = "") -> list[Difference]:
    missing = object()
    return [Difference(category, prefix + key, a.get(key), b.get(key))
            for key in sorted(a.keys() | b.keys())
            if a.get(key, missing) != b.get(key, missing)]


def _labels(a: Fingerprint, b: Fingerprint) -> list[tuple[str, str, str]]:
    """Pairs of topologies to compare: by label, or the one of each when both ran one."""
    if len(a.topologies) == len(b.topologies) == 1:
        (la,), (lb,) = a.topologies, b.topologies
        return [(la, lb, "topology" if la == lb else f"{la}|{lb}")]
    return [(label, label, label) for label in sorted(a.topologies.keys() | b.topologies.keys())]


def _topology_differences(a: Fingerprint, b: Fingerprint) -> list[Difference]:
    found: list[Difference] = []
    for la, lb, shown in _labels(a, b):
        ta, tb = a.topologies.get(la), b.topologies.get(lb)
        if ta is None or tb is None:
            found.append(Difference(Category.CONFIGURATION, shown,
                                    "present" if ta else None, "present" if tb else None))
            continue
        found += _compare(Category.CONFIGURATION, dict(ta.settings), dict(tb.settings),
                          f"{shown}.")
        found += _compare(Category.DERIVED, _derived(ta), _derived(tb), f"{shown}.")
    return found


def _derived(topology: TopologyEvidence) -> dict[str, Scalar]:
    """What follows from a topology's settings (and the files and templates behind them)."""
    derived: dict[str, Scalar] = {"digest": topology.digest,
                                  "model.revision": topology.model.revision}
    derived |= {f"engine_config.{role}": h for role, h in topology.engine_configs.items()}
    if topology.file is not None:
        derived |= {"file.sha256": topology.file.sha256,
                    "file.git_commit": topology.file.git_commit,
                    "file.git_dirty": topology.file.git_dirty}
    return derived


def diff_fingerprints(a: Fingerprint, b: Fingerprint) -> list[Difference]:
    """Every difference, in Category order; the capture time is never one."""
    found = [*_topology_differences(a, b)]
    found += _compare(Category.CONFIGURATION, dict(a.inputs), dict(b.inputs), "inputs.")
    if a.command != b.command:
        found.append(Difference(Category.CONFIGURATION, "command", a.command, b.command))
    found += _compare(Category.DERIVED,
                      {k: f.sha256 for k, f in a.input_files.items()},
                      {k: f.sha256 for k, f in b.input_files.items()}, "input_files.")
    found += _compare(Category.VERSIONS,
                      {"dis-serve": a.dis_serve_version, "python": a.python, **a.packages},
                      {"dis-serve": b.dis_serve_version, "python": b.python, **b.packages})
    found += _compare(Category.HARDWARE, _host(a), _host(b), "host.")
    found += _compare(Category.ENVIRONMENT, dict(a.environment), dict(b.environment))
    order = list(Category)
    return sorted(found, key=lambda d: order.index(d.category))


def _host(fp: Fingerprint) -> dict[str, Scalar]:
    host = fp.host.model_dump(mode="json", exclude={"gpus"})
    host["gpus"] = ", ".join(f"{g.name} ({g.memory_mib} MiB)" for g in fp.host.gpus) or None
    return host


def diff_results(a_dir: Path, b_dir: Path) -> list[ResultRow]:
    """Every metric of every sweep point both benchmark runs share; [] unless both are one."""
    from .metrics import METRICS
    from .report import read_result

    if not (a_dir / RESULTS_FILE).is_file() or not (b_dir / RESULTS_FILE).is_file():
        return []
    ra, rb = read_result(a_dir / RESULTS_FILE), read_result(b_dir / RESULTS_FILE)
    b_points = {p.point: p for p in rb.points}
    rows = []
    for pa in ra.points:
        pb = b_points.get(pa.point)
        if pb is None:
            continue
        rows += [ResultRow(load=pa.point.label, metric=m.title, unit=m.unit, a=m.get(pa),
                           b=m.get(pb)) for m in METRICS]
    return rows


def load_run(directory: Path) -> Fingerprint:
    """The fingerprint of an output directory; bad input naming the directory otherwise."""
    path = directory / FINGERPRINT_FILE
    if not path.is_file():
        raise UserInputError(f"no {FINGERPRINT_FILE} in {directory}", source=str(directory),
                             fix="give an output directory of bench, compare, chaos or plan "
                                 "(runs before fingerprints existed have none)")
    try:
        return read_fingerprint(path)
    except ValueError as exc:
        raise UserInputError(f"not a dis-serve fingerprint ({str(exc).splitlines()[0]})",
                             source=str(path), fix="rerun the command that wrote it") from None
