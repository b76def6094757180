"""`setpoint.api.openapi`: an OpenAPI v3 document per group-version, each kind's schema named
as Kubernetes names it, with its group-version-kind, and every reference resolvable, so
that `kubectl explain` can walk from a kind down to any field."""

from __future__ import annotations

import json
from typing import Any

import pytest

from setpoint.api.openapi import group_version, index
from setpoint.engine import builtin_kinds
from setpoint.errors import NotFound
from setpoint.model import Kind, Schema
from setpoint.model.crd import crd_of, kind_of
from setpoint.model.crd_check import check_structural

META = "io.k8s.apimachinery.pkg.apis.meta.v1"


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if "$ref" in node else []
        return found + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_the_index_names_every_group_version() -> None:
    paths = index(builtin_kinds())["paths"]
    assert paths == {
        "api/v1": {"serverRelativeURL": "/openapi/v3/api/v1"},
        "apis/admissionregistration.k8s.io/v1": {
            "serverRelativeURL": "/openapi/v3/apis/admissionregistration.k8s.io/v1"
        },
        "apis/apiextensions.k8s.io/v1": {
            "serverRelativeURL": "/openapi/v3/apis/apiextensions.k8s.io/v1"
        },
        "apis/coordination.k8s.io/v1": {
            "serverRelativeURL": "/openapi/v3/apis/coordination.k8s.io/v1"
        },
        "apis/setpoint.dev/v1alpha1": {
            "serverRelativeURL": "/openapi/v3/apis/setpoint.dev/v1alpha1"
        },
    }


@pytest.mark.parametrize(
    ("group", "version", "names"),
    [
        ("setpoint.dev", "v1alpha1", ["Autoscaler", "ControllerRevision", "Deployment", "Job",
                                      "Process", "Service", "Thermostat"]),
        ("", "v1", ["ConfigMap", "Event", "Namespace", "Pod", "Secret"]),
        ("coordination.k8s.io", "v1", ["Lease"]),
        ("apiextensions.k8s.io", "v1", ["CustomResourceDefinition"]),
    ],
)  # fmt: skip
def test_each_kind_has_a_named_schema_with_its_gvk(
    group: str, version: str, names: list[str]
) -> None:
    document = group_version(builtin_kinds(), group, version)
    assert document["openapi"].startswith("3.0")
    json.dumps(document)  # plain JSON
    schemas = document["components"]["schemas"]
    for ref in _refs(document):
        assert ref.removeprefix("#/components/schemas/") in schemas, ref
    kinds = {
        gvk["kind"]: name
        for name, schema in schemas.items()
        for gvk in schema.get("x-kubernetes-group-version-kind", [])
    }
    assert sorted(k for k in kinds if not k.endswith("List")) == names
    for kind in names:
        name = kinds[kind]
        schema = schemas[name]
        assert schema["x-kubernetes-group-version-kind"] == [
            {"group": group, "version": version, "kind": kind}
        ]
        assert schema["properties"]["metadata"]["allOf"] == [
            {"$ref": f"#/components/schemas/{META}.ObjectMeta"}
        ]
        assert kinds[kind + "List"] == name + "List"
    assert f"{META}.ObjectMeta" in schemas


def test_schemas_are_named_as_kubernetes_names_them() -> None:
    assert (
        "dev.setpoint.v1alpha1.Process"
        in (group_version(builtin_kinds(), "setpoint.dev", "v1alpha1")["components"]["schemas"])
    )
    assert (
        "io.k8s.api.core.v1.Event"
        in (group_version(builtin_kinds(), "", "v1")["components"]["schemas"])
    )
    assert (
        "io.k8s.api.coordination.v1.Lease"
        in (group_version(builtin_kinds(), "coordination.k8s.io", "v1")["components"]["schemas"])
    )


def test_a_process_schema_explains_its_fields() -> None:
    schemas = group_version(builtin_kinds(), "setpoint.dev", "v1alpha1")["components"]["schemas"]
    process = schemas["dev.setpoint.v1alpha1.Process"]
    spec = process["properties"]["spec"]
    assert spec["description"].startswith("What to run")
    assert spec["properties"]["args"]["type"] == "array"
    assert spec["properties"]["restartPolicy"]["enum"] == ["Always", "OnFailure", "Never"]
    body = {k: v for k, v in process.items() if not k.startswith("x-")}
    body["properties"] = {k: v for k, v in body["properties"].items() if k != "metadata"}
    check_structural(body, "Process")


class WidgetSpec(Schema):
    size: int
    """How big."""


def test_a_kind_defined_by_a_crd_is_documented_by_its_schema() -> None:
    registry = builtin_kinds()
    registry.define(kind_of(crd_of(Kind("example.com/v1", "Widget", spec=WidgetSpec))))
    assert "apis/example.com/v1" in index(registry)["paths"]
    schemas = group_version(registry, "example.com", "v1")["components"]["schemas"]
    widget = schemas["com.example.v1.Widget"]
    assert widget["properties"]["spec"]["properties"]["size"]["description"] == "How big."
    assert widget["x-kubernetes-group-version-kind"] == [
        {"group": "example.com", "version": "v1", "kind": "Widget"}
    ]


def test_a_group_version_with_no_kind_is_not_found() -> None:
    with pytest.raises(NotFound):
        group_version(builtin_kinds(), "example.com", "v1")
