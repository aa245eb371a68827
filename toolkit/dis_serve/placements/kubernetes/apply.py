"""`dis-serve apply FILE --deployed DEPLOYED.yaml`: a change of a graph Dynamo's operator
runs, rendered for kubectl. Worker counts alone are a JSON patch of the components'
replicas (the operator adds or removes pods; Dynamo's own SIGTERM handling drains them);
anything else a running graph takes is the new DynamoGraphDeployment, whose changed
components the operator rolls. What needs a new graph is refused as on every placement.
Pure: topologies in, text out."""

from __future__ import annotations

import json
from dataclasses import dataclass

import yaml

from ...change.diff import changed_keys, refusals
from ...errors import UserInputError
from ...topology import Topology
from .manifests import render_dgd


@dataclass(frozen=True)
class OperatorChange:
    lines: list[str]
    files: dict[str, str]


def kubernetes_change(deployed: Topology, edited: Topology, source: str,
                      out_dir: str) -> OperatorChange:
    """The change, its files named as they will be written under `out_dir`."""
    refused = refusals(changed_keys(deployed, edited))
    if refused:
        key, why = refused[0]
        raise UserInputError(f"{key} changed; a running graph cannot take it ({why})",
                             source=source, key=key,
                             fix="render the new graph with `dis-serve render --target k8s` "
                                 "and deploy it beside or instead of this one")
    before, after = render_dgd(deployed), render_dgd(edited)
    name, namespace = edited.name, edited.kubernetes.namespace
    patch = _replicas_patch(before, after)
    if patch is None:
        file = f"{name}-dgd.yaml"
        return OperatorChange(
            lines=[f"the components' specs change: the operator rolls them; "
                   f"kubectl apply -f {out_dir}/{file}"],
            files={file: yaml.safe_dump(after, sort_keys=False)})
    if not patch:
        return OperatorChange(lines=["no change to the DynamoGraphDeployment"], files={})
    file = f"{name}-replicas.json"
    ops = [{"op": "replace", "path": f"/spec/components/{i}/replicas", "value": new}
           for i, _component, _old, new in patch]
    return OperatorChange(
        lines=[f"{component}: {old} -> {new} replicas" for _i, component, old, new in patch]
        + [f"kubectl patch dynamographdeployment {name} -n {namespace} --type json "
           f"--patch-file {out_dir}/{file}"],
        files={file: json.dumps(ops, indent=2) + "\n"})


def _replicas_patch(before: dict, after: dict) -> list[tuple[int, str, int, int]] | None:
    """(component index, name, replicas before, after) for each component whose replicas
    alone differ; None when anything else differs."""
    old, new = before["spec"]["components"], after["spec"]["components"]
    if [c["name"] for c in old] != [c["name"] for c in new] or \
            {**before, "spec": None} != {**after, "spec": None}:
        return None
    changed = []
    for index, (a, b) in enumerate(zip(old, new, strict=True)):
        if {**a, "replicas": 0} != {**b, "replicas": 0}:
            return None
        if a["replicas"] != b["replicas"]:
            changed.append((index, a["name"], a["replicas"], b["replicas"]))
    return changed
