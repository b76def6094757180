"""The OpenAPI v3 documents the server publishes, so that `kubectl explain` (and any
OpenAPI-reading client) knows every kind's fields.

    index(registry)                          # GET /openapi/v3
    group_version(registry, group, version)  # GET /openapi/v3/apis/{group}/{version}
                                             # (core: group "", /openapi/v3/api/v1)
    v2_document(accept)                      # GET /openapi/v2: an empty Swagger 2.0 document

Each kind's schema is its `openAPIV3Schema` (`setpoint.model.crd.openapi_schema`: made
from its pydantic models, or its CRD's), named as Kubernetes names schemas
(`dev.setpoint.v1alpha1.Process`, `io.k8s.api.core.v1.Event`), carrying
`x-kubernetes-group-version-kind`, with `metadata` a reference to the apimachinery
`ObjectMeta` schema, which the document holds too; beside each kind, its `...List`.
The path items (operations and their parameters) are the server's own
(`setpoint.api.discovery.openapi_paths`), added by the caller.

`/openapi/v2` is served empty (no paths, no definitions), as protobuf when asked (kubectl
only reads it so) or JSON: kubectl asks for it when validating a manifest whose group-version
the v3 documents lack (a custom resource whose CRD is created earlier in the same file), and
an empty document tells it that the server has no schema of that kind to check, so the
server validates it when it is written, as a new CRD's resource on Kubernetes.

Pure: no I/O.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from setpoint.errors import NotFound
from setpoint.model import Kind, Registry
from setpoint.model.crd import openapi_schema

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
"""Where the apimachinery schemas (ObjectMeta, ListMeta...) are named."""

_KUBERNETES_GROUPS = {
    "": "io.k8s.api.core",
    "coordination.k8s.io": "io.k8s.api.coordination",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}


def index(registry: Registry) -> dict[str, Any]:
    """`/openapi/v3`: the document of each group-version the registry serves."""
    paths: dict[str, Any] = {}
    for group, version in sorted({(k.group, k.version) for k in registry}):
        where = f"apis/{group}/{version}" if group else f"api/{version}"
        paths[where] = {"serverRelativeURL": f"/openapi/v3/{where}"}
    return {"paths": paths}


def schema_name(kind: Kind, suffix: str = "") -> str:
    """`dev.setpoint.v1alpha1.Process`: the group reversed, the version, the kind (the
    Kubernetes groups under their own names, e.g. `io.k8s.api.core.v1.Event`)."""
    prefix = _KUBERNETES_GROUPS.get(kind.group)
    if prefix is None:
        prefix = ".".join(reversed(kind.group.split(".")))
    return f"{prefix}.{kind.version}.{kind.kind}{suffix}"


def group_version(registry: Registry, group: str, version: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of one group-version: `NotFound` if no kind is in it."""
    kinds = [k for k in registry if (k.group, k.version) == (group, version)]
    if not kinds:
        where = f"{group}/{version}" if group else version
        raise NotFound(f"no kind is served in {where}")
    schemas: dict[str, Any] = dict(apimachinery_schemas())
    for kind in kinds:
        schemas[schema_name(kind)] = kind_schema(kind)
        schemas[schema_name(kind, "List")] = list_schema(kind)
    api_version = f"{group}/{version}" if group else version
    return {
        "openapi": "3.0.0",
        "info": {"title": "setpoint", "version": api_version},
        "paths": {},
        "components": {"schemas": schemas},
    }


def _gvk(kind: Kind, name: str) -> list[dict[str, str]]:
    return [{"group": kind.group, "version": kind.version, "kind": name}]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def kind_schema(kind: Kind) -> dict[str, Any]:
    """The schema of one object of `kind`, as a component of its document."""
    schema = copy.deepcopy(openapi_schema(kind))
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {"type": "string", "description": _API_VERSION_DOC}
    properties["kind"] = {"type": "string", "description": _KIND_DOC}
    properties["metadata"] = {
        "allOf": [_ref(f"{META}.ObjectMeta")],
        "default": {},
        "description": "Standard object's metadata.",
    }
    schema.setdefault("description", f"{kind.kind} ({kind.api_version}).")
    schema["x-kubernetes-group-version-kind"] = _gvk(kind, kind.kind)
    return schema


def list_schema(kind: Kind) -> dict[str, Any]:
    """The schema of a list of `kind` (`ProcessList`)."""
    return {
        "type": "object",
        "description": f"A list of {kind.kind}.",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": _API_VERSION_DOC},
            "kind": {"type": "string", "description": _KIND_DOC},
            "items": {"type": "array", "items": _ref(schema_name(kind))},
            "metadata": {"allOf": [_ref(f"{META}.ListMeta")], "default": {}},
        },
        "x-kubernetes-group-version-kind": _gvk(kind, kind.kind + "List"),
    }


_API_VERSION_DOC = "APIVersion defines the versioned schema of this representation of an object."
_KIND_DOC = "Kind is a string value representing the REST resource this object represents."


def _string(description: str, **more: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **more}


def _string_map(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": {"type": "string", "default": ""},
        "description": description,
    }


def apimachinery_schemas() -> dict[str, Any]:
    """ObjectMeta, ListMeta, OwnerReference, ManagedFieldsEntry, FieldsV1 and Time, as the
    Kubernetes API describes them (the fields setpoint keeps)."""
    time = _ref(f"{META}.Time")
    return {
        f"{META}.Time": {
            "type": "string",
            "format": "date-time",
            "description": "A time in RFC 3339 form, to the second.",
        },
        f"{META}.FieldsV1": {
            "type": "object",
            "description": "A set of fields, as a trie (server-side apply).",
        },
        f"{META}.ObjectMeta": {
            "type": "object",
            "description": "Metadata that all persisted resources must have.",
            "properties": {
                "name": _string("Unique within a namespace; a DNS-1123 subdomain."),
                "generateName": _string("A prefix the server completes into a unique name."),
                "namespace": _string("The namespace (empty for cluster-scoped objects)."),
                "uid": _string("Unique in time and space; set by the server, never reused."),
                "resourceVersion": _string(
                    "The revision of the store that last wrote the object (opaque)."
                ),
                "generation": {
                    "type": "integer",
                    "format": "int64",
                    "description": "Counts changes of the desired state (spec).",
                },
                "creationTimestamp": {"allOf": [time], "description": "When it was created."},
                "deletionTimestamp": {
                    "allOf": [time],
                    "description": "When deletion was asked for (finalizers still to run).",
                },
                "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
                "labels": _string_map("Labels, for selectors."),
                "annotations": _string_map("Annotations: data for tools, not for selectors."),
                "finalizers": {
                    "type": "array",
                    "items": {"type": "string", "default": ""},
                    "description": "What must happen before the object is deleted.",
                    "x-kubernetes-list-type": "set",
                },
                "ownerReferences": {
                    "type": "array",
                    "items": {"allOf": [_ref(f"{META}.OwnerReference")], "default": {}},
                    "description": "The objects this one depends on (garbage collection).",
                    "x-kubernetes-list-map-keys": ["uid"],
                    "x-kubernetes-list-type": "map",
                },
                "managedFields": {
                    "type": "array",
                    "items": {"allOf": [_ref(f"{META}.ManagedFieldsEntry")], "default": {}},
                    "description": "Which manager owns which fields (server-side apply).",
                },
            },
        },
        f"{META}.ListMeta": {
            "type": "object",
            "description": "Metadata of a list.",
            "properties": {
                "resourceVersion": _string("The revision the list was read at."),
                "continue": _string("Where the next page starts, if there is one."),
                "remainingItemCount": {"type": "integer", "format": "int64"},
            },
        },
        f"{META}.OwnerReference": {
            "type": "object",
            "description": "An object that owns this one.",
            "required": ["apiVersion", "kind", "name", "uid"],
            "properties": {
                "apiVersion": _string("The owner's API version."),
                "kind": _string("The owner's kind."),
                "name": _string("The owner's name."),
                "uid": _string("The owner's uid."),
                "controller": {"type": "boolean", "description": "Whether it is the controller."},
                "blockOwnerDeletion": {
                    "type": "boolean",
                    "description": "Whether the owner waits for this one (foreground deletion).",
                },
            },
            "x-kubernetes-map-type": "atomic",
        },
        f"{META}.ManagedFieldsEntry": {
            "type": "object",
            "description": "The fields one manager owns, and how it wrote them.",
            "properties": {
                "manager": _string("Who manages the fields."),
                "operation": _string("Apply or Update."),
                "apiVersion": _string("The version the fields are named in."),
                "time": {"allOf": [time]},
                "fieldsType": _string("FieldsV1."),
                "fieldsV1": {"allOf": [_ref(f"{META}.FieldsV1")]},
                "subresource": _string("The subresource written (e.g. status), if any."),
            },
        },
    }


V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
"""The media type kubectl asks `/openapi/v2` in (gnostic's OpenAPI v2 `Document`)."""
V2_PROTOBUF_ANSWER = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
"""The one the answer names, as kube-apiserver's (Go's mime parser refuses the `@`)."""


def v2_document(accept: str) -> tuple[bytes, str]:
    """`/openapi/v2`: an empty Swagger 2.0 document, as protobuf if `accept` names it, else
    JSON; (body, media type)."""
    title, version = b"setpoint", b"v2"
    if V2_PROTOBUF in accept:
        # Document{swagger (1): "2.0", info (2): Info{title (1), version (2)}}
        info = _field(1, title) + _field(2, version)
        return _field(1, b"2.0") + _field(2, info), V2_PROTOBUF_ANSWER
    document = {"swagger": "2.0", "info": {"title": "setpoint", "version": "v2"}, "paths": {}}
    return json.dumps(document).encode(), "application/json"


def _field(number: int, value: bytes) -> bytes:
    """One length-delimited protobuf field (every value here is shorter than 128 bytes)."""
    return bytes([number << 3 | 2, len(value)]) + value
