"""Kinds as data through the real kubectl against `setpoint serve`: the server publishes the
built-in kinds' CRDs, a CRD applied with `kubectl apply -f` (no Python) serves a new kind,
whose objects are validated by its schema (a bad field is refused naming it, nothing is
written), listed with its printer columns, and explained; `setpoint get` (another
process) knows the kind too."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

from api_kit import Server

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {
            "plural": "gadgets",
            "singular": "gadget",
            "kind": "Gadget",
            "shortNames": ["gd"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {
                                        "type": "integer",
                                        "minimum": 1,
                                        "description": "How big the gadget is.",
                                    },
                                    "colour": {"type": "string", "default": "red"},
                                },
                            }
                        },
                    }
                },
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Colour", "type": "string", "jsonPath": ".spec.colour"},
                ],
            }
        ],
    },
}


def gadget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": name},
        "spec": spec,
    }


def test_the_server_publishes_the_builtin_crds(server: Server) -> None:
    names = server.ok("get", "crds", "-o", "name").out.split()
    assert "customresourcedefinition.apiextensions.k8s.io/processes.setpoint.dev" in names


def test_a_crd_applied_with_kubectl_serves_a_validated_kind(server: Server) -> None:
    server.ok("apply", "-f", str(server.write("gadget-crd.yaml", WIDGET_CRD)))
    server.ok("wait", "--for", "condition=established", "crd/gadgets.example.com", "--timeout=30s")
    created = server.ok("apply", "-f", str(server.write("g1.yaml", gadget("g1", {"size": 2}))))
    assert "gadget.example.com/g1 created" in created.out

    refused = server.kubectl(
        "apply", "-f", str(server.write("bad.yaml", gadget("bad", {"size": 0})))
    )
    assert refused.code != 0
    assert "spec.size" in refused.err
    listed = server.ok("get", "gadgets", "-o", "name").out.split()
    assert listed == ["gadget.example.com/g1"]  # nothing of the refused one written

    table = server.ok("get", "gd").out.splitlines()
    assert table[0].split() == ["NAME", "READY", "SIZE", "COLOUR", "AGE"]
    assert table[1].split()[:4] == ["g1", "-", "2", "red"]  # the schema's default

    explained = server.ok("explain", "gadgets.spec.size").out
    assert "How big the gadget is." in explained

    env = {k: v for k, v in os.environ.items() if not k.startswith("SETPOINT_")}
    got = subprocess.run(
        [sys.executable, "-m", "setpoint", "--store", server.store, "get", "gadgets"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert got.returncode == 0, got.stderr
    assert [line.split()[:3] for line in got.stdout.splitlines()[1:]] == [["g1", "-", "2"]]


def _process(args: list[str], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "setpoint.dev/v1alpha1",
        "kind": "Process",
        "metadata": {"name": "ssa", "labels": labels},
        "spec": {"args": args},
    }


def test_server_side_apply_owns_fields_and_refuses_another_managers(server: Server) -> None:
    mine = server.write("ssa.yaml", _process(["sleep", "60"], {"app": "ssa"}))
    assert "serverside-applied" in server.ok("apply", "--server-side", "-f", str(mine)).out
    stored = server.stored("Process", "ssa")
    (entry,) = stored["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl", "Apply")
    assert entry["fieldsV1"]["f:spec"] == {"f:args": {}}

    server.ok("apply", "--server-side", "-f", str(mine))  # again: nothing to write
    assert (
        server.stored("Process", "ssa")["metadata"]["resourceVersion"]
        == (stored["metadata"]["resourceVersion"])
    )

    theirs = server.write("ssa-other.yaml", _process(["sleep", "5"], {"app": "ssa"}))
    refused = server.kubectl("apply", "--server-side", "--field-manager=other", "-f", str(theirs))
    assert refused.code != 0
    assert "conflict" in refused.err
    assert ".spec.args" in refused.err
    assert server.stored("Process", "ssa")["spec"]["args"] == ["sleep", "60"]

    server.ok(
        "apply", "--server-side", "--field-manager=other", "--force-conflicts", "-f", str(theirs)
    )
    taken = server.stored("Process", "ssa")
    assert taken["spec"]["args"] == ["sleep", "5"]
    owners = {e["manager"]: e["fieldsV1"] for e in taken["metadata"]["managedFields"]}
    assert "f:args" in owners["other"]["f:spec"]
    assert "f:spec" not in owners["kubectl"]  # kubectl keeps only its label


def test_a_file_with_a_crd_and_its_object_applies_as_on_kubernetes(server: Server) -> None:
    """kubectl validates the object against /openapi/v2 (its group-version is in no v3
    document yet): the server answers an empty document, so kubectl says what it says to
    kube-apiserver, and a second apply creates the object (kopf's peering.yaml)."""
    crd: dict[str, Any] = {
        **WIDGET_CRD,
        "metadata": {"name": "knobs.knobs.example.com"},
        "spec": {
            **WIDGET_CRD["spec"],
            "group": "knobs.example.com",
            "names": {"plural": "knobs", "singular": "knob", "kind": "Knob"},
        },
    }
    knob = {**gadget("k1", {"size": 1}), "apiVersion": "knobs.example.com/v1", "kind": "Knob"}
    path = str(server.write("knobs.yaml", crd, knob))
    first = server.kubectl("apply", "-f", path)
    assert "customresourcedefinition.apiextensions.k8s.io/knobs.knobs.example.com created" in (
        first.out
    )
    assert "ensure CRDs are installed first" in first.err, first
    second = server.ok("apply", "-f", path)
    assert "knob.knobs.example.com/k1 created" in second.out
    refused = server.kubectl("apply", "-f", str(server.write("k0.yaml", {**knob, "spec": {}})))
    assert refused.code != 0
    assert "spec.size" in refused.err  # the server validates it
