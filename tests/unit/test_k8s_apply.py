"""`apply FILE --deployed DEPLOYED`: a change of a graph Dynamo's operator runs, as kubectl
takes it: a JSON patch of replicas when only worker counts change, else the new DGD."""

from __future__ import annotations

import json

import pytest
import yaml

from conftest import GRAPHS
from dis_serve.errors import UserInputError
from dis_serve.placements.kubernetes.apply import kubernetes_change
from dis_serve.placements.kubernetes.manifests import render_dgd
from dis_serve.topology import Topology

DEPLOYED = yaml.safe_load((GRAPHS / "llama70b-h100-disagg.yaml").read_text())


def _edited(**pools) -> Topology:
    data = yaml.safe_load(yaml.safe_dump(DEPLOYED))
    for role, settings in pools.items():
        data["pools"][role] |= settings
    return Topology.model_validate(data)


def test_new_worker_counts_are_a_replicas_patch_for_kubectl():
    change = kubernetes_change(Topology.model_validate(DEPLOYED), _edited(decode={"workers": 8}),
                               "edited.yaml", "out")
    (patch_file,) = change.files
    patch = json.loads(change.files[patch_file])
    dgd = render_dgd(Topology.model_validate(DEPLOYED))
    index = int(patch[0]["path"].split("/")[3])
    assert dgd["spec"]["components"][index]["type"] == "decode"
    assert patch == [{"op": "replace", "path": f"/spec/components/{index}/replicas",
                      "value": 8}]
    assert change.lines[-1].startswith("kubectl patch dynamographdeployment llama70b-disagg "
                                       "-n llm --type json --patch-file out/")


def test_an_engine_setting_is_the_new_dgd_the_operator_rolls():
    edited = _edited(decode={"max_batch_size": 128})
    change = kubernetes_change(Topology.model_validate(DEPLOYED), edited, "edited.yaml", "out")
    (dgd_file,) = change.files
    assert yaml.safe_load(change.files[dgd_file]) == render_dgd(edited)
    assert "operator rolls them; kubectl apply -f out/" in change.lines[0]


def test_a_new_model_is_refused_as_on_every_placement():
    data = yaml.safe_load(yaml.safe_dump(DEPLOYED))
    data["model"]["served_name"] = "other"
    with pytest.raises(UserInputError, match=r"model\.served_name changed"):
        kubernetes_change(Topology.model_validate(DEPLOYED), Topology.model_validate(data),
                          "edited.yaml", "out")
