"""A hand-written CRD (`widgets.example.com`) and objects of its kind, for the CRD tests."""

from __future__ import annotations

from typing import Any


def widget_crd(**schema_changes: Any) -> dict[str, Any]:
    spec_schema: dict[str, Any] = {
        "type": "object",
        "required": ["size"],
        "properties": {
            "size": {"type": "integer", "minimum": 1, "description": "How big."},
            "colour": {"type": "string", "enum": ["red", "blue"], "default": "red"},
            "port": {"x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "parts": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "count": {"type": "integer", "default": 1},
                    },
                },
            },
        },
    }
    spec_schema.update(schema_changes)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": spec_schema,
                                "status": {
                                    "type": "object",
                                    "properties": {"ready": {"type": "boolean"}},
                                },
                            },
                        }
                    },
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
                    ],
                }
            ],
        },
    }


def widget(spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": spec,
    }
