"""What a `CustomResourceDefinition` must be to be admitted (`check_crd`: its name, group,
names, scope, versions, subresources and columns) and what a Kubernetes *structural*
schema is (`check_structural`): each refusal an `Invalid` naming the field.

`setpoint.model.crd` (kinds as data) runs these checks on every CRD written. Pure: no I/O,
no clock.
"""

from __future__ import annotations

import re
from typing import Any

from setpoint.errors import Invalid
from setpoint.model.admission import child_path, refuse_unknown_fields, unknown_field_message
from setpoint.model.meta import Object
from setpoint.model.patterns import compile_pattern

_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND_NAME = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_VERSION = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?|[a-z0-9]([-a-z0-9]*[a-z0-9])?")
FIELD_PATH = re.compile(r"(\.[A-Za-z_][\w-]*)+")
"""A printer column's or a scale subresource's path: dotted field names."""


def allows_any(node: dict[str, Any]) -> bool:
    """Whether a schema node takes any value (preserves unknown fields, or is int-or-string)."""
    return bool(
        node.get("x-kubernetes-preserve-unknown-fields") or node.get("x-kubernetes-int-or-string")
    )


def check_crd(crd: Object) -> None:
    """Refuse a CRD that is not one setpoint can serve, naming the field: its name must be
    `<plural>.<group>`, the names valid, one version stored, and every version's schema
    structural (`check_structural`)."""
    refuse_unknown_fields(crd, ("apiVersion", "kind", "metadata", "spec", "status"))
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        raise Invalid("required", field="spec")
    refuse_unknown_fields(
        spec,
        ("group", "names", "scope", "versions", "conversion", "preserveUnknownFields"),
        "spec",
    )
    group = spec.get("group")
    if not isinstance(group, str) or not _DNS1123_SUBDOMAIN.fullmatch(group) or "." not in group:
        raise Invalid(
            f"{group!r}: want a DNS subdomain with at least one dot, e.g. example.com",
            field="spec.group",
        )
    names = spec.get("names")
    if not isinstance(names, dict):
        raise Invalid("required", field="spec.names")
    refuse_unknown_fields(
        names,
        ("plural", "singular", "kind", "listKind", "shortNames", "categories"),
        "spec.names",
    )
    for field in ("plural", "singular"):
        value = names.get(field, "" if field == "singular" else None)
        if field == "singular" and value == "":
            continue
        if not isinstance(value, str) or not _DNS1035_LABEL.fullmatch(value):
            raise Invalid(
                f"{value!r}: want a lowercase name (a DNS-1035 label)", field=f"spec.names.{field}"
            )
    kind = names.get("kind")
    if not isinstance(kind, str) or not _KIND_NAME.fullmatch(kind):
        raise Invalid(f"{kind!r}: want a CamelCase name, e.g. Widget", field="spec.names.kind")
    singular = names.get("singular") or kind.lower()
    if singular != kind.lower():
        raise Invalid(
            f"{singular!r}: want {kind.lower()!r}, the kind in lower case",
            field="spec.names.singular",
        )
    for field in ("shortNames", "categories"):
        listed = names.get(field, [])
        if not isinstance(listed, list) or not all(
            isinstance(n, str) and _DNS1035_LABEL.fullmatch(n) for n in listed
        ):
            raise Invalid("want a list of lowercase names", field=f"spec.names.{field}")
    name = (crd.get("metadata") or {}).get("name")
    if name != f"{names['plural']}.{group}":
        raise Invalid(
            f"{name!r}: want {names['plural']}.{group} (spec.names.plural.spec.group)",
            field="metadata.name",
        )
    if spec.get("scope", "Namespaced") not in ("Namespaced", "Cluster"):
        raise Invalid(f"{spec.get('scope')!r}: want Namespaced or Cluster", field="spec.scope")
    _check_versions(spec.get("versions"))


def _check_versions(versions: Any) -> None:
    if not isinstance(versions, list) or not versions:
        raise Invalid("want at least one version", field="spec.versions")
    seen: set[str] = set()
    stored = 0
    for i, version in enumerate(versions):
        where = f"spec.versions[{i}]"
        if not isinstance(version, dict):
            raise Invalid("want a mapping", field=where)
        refuse_unknown_fields(
            version,
            (
                "name",
                "served",
                "storage",
                "schema",
                "subresources",
                "additionalPrinterColumns",
                "deprecated",
                "deprecationWarning",
                "selectableFields",
            ),
            where,
        )
        name = version.get("name")
        if not isinstance(name, str) or not _VERSION.fullmatch(name):
            raise Invalid(
                f"{name!r}: want a version name, e.g. v1 or v1alpha1", field=f"{where}.name"
            )
        if name in seen:
            raise Invalid(f"{name!r} is listed twice", field=f"{where}.name")
        seen.add(name)
        for flag in ("served", "storage"):
            if not isinstance(version.get(flag), bool):
                raise Invalid("required: true or false", field=f"{where}.{flag}")
        stored += version["storage"]
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            raise Invalid("required", field=f"{where}.schema.openAPIV3Schema")
        check_structural(schema, f"{where}.schema.openAPIV3Schema")
        if schema.get("type") != "object":
            raise Invalid(
                "want type: object at the root", field=f"{where}.schema.openAPIV3Schema.type"
            )
        _check_subresources(version.get("subresources"), f"{where}.subresources")
        for j, column in enumerate(version.get("additionalPrinterColumns") or []):
            at = f"{where}.additionalPrinterColumns[{j}]"
            if not isinstance(column, dict) or not isinstance(column.get("name"), str):
                raise Invalid("required", field=f"{at}.name")
            if not isinstance(column.get("jsonPath"), str) or not column["jsonPath"].startswith(
                "."
            ):
                raise Invalid("want a JSON path, e.g. .spec.replicas", field=f"{at}.jsonPath")
    if stored != 1:
        raise Invalid(
            f"exactly one version must have storage: true ({stored} have)", field="spec.versions"
        )


def _check_subresources(subresources: Any, where: str) -> None:
    if subresources is None:
        return
    if not isinstance(subresources, dict):
        raise Invalid("want a mapping", field=where)
    refuse_unknown_fields(subresources, ("status", "scale"), where)
    scale = subresources.get("scale")
    if scale is not None:
        for field in ("specReplicasPath", "statusReplicasPath"):
            path = scale.get(field) if isinstance(scale, dict) else None
            if not isinstance(path, str) or not FIELD_PATH.fullmatch(path):
                raise Invalid(
                    "want a field path, e.g. .spec.replicas", field=f"{where}.scale.{field}"
                )


_SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "default",
        "enum",
        "nullable",
        "maximum",
        "exclusiveMaximum",
        "minimum",
        "exclusiveMinimum",
        "maxLength",
        "minLength",
        "pattern",
        "maxItems",
        "minItems",
        "uniqueItems",
        "multipleOf",
        "maxProperties",
        "minProperties",
        "required",
        "items",
        "allOf",
        "oneOf",
        "anyOf",
        "not",
        "properties",
        "additionalProperties",
        "example",
        "externalDocs",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-int-or-string",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-list-type",
        "x-kubernetes-list-map-keys",
        "x-kubernetes-map-type",
        "x-kubernetes-validations",
    }
)
_TYPES = ("object", "array", "string", "integer", "number", "boolean")


def check_structural(node: Any, where: str, *, in_logic: bool = False) -> None:
    """Refuse a schema that is not structural (as Kubernetes defines it), naming the field:
    known keywords only, no `$ref`, a `type` on every node (unless it preserves unknown
    fields or is int-or-string), `properties` only on objects and not beside
    `additionalProperties`, and no types or properties inside allOf/anyOf/oneOf/not."""
    if not isinstance(node, dict):
        raise Invalid("want a schema (a mapping)", field=where)
    for key in node:
        if key not in _SCHEMA_KEYWORDS:
            message = (
                "$ref is not allowed: write the schema inline"
                if key == "$ref"
                else unknown_field_message(str(key), _SCHEMA_KEYWORDS)
            )
            raise Invalid(message, field=child_path(where, key))
    kind = node.get("type")
    if in_logic:
        for key in ("type", "properties", "additionalProperties", "items", "default", "nullable"):
            if key in node and key not in ("items",):
                raise Invalid(
                    f"{key} is not allowed inside allOf, anyOf, oneOf or not",
                    field=child_path(where, key),
                )
    elif kind is None and not allows_any(node):
        raise Invalid(
            "required: every node of a structural schema has a type",
            field=child_path(where, "type"),
        )
    if kind is not None and kind not in _TYPES:
        raise Invalid(f"{kind!r}: want one of {', '.join(_TYPES)}", field=child_path(where, "type"))
    if "properties" in node:
        if kind not in ("object", None):
            raise Invalid("properties need type: object", field=child_path(where, "type"))
        if "additionalProperties" in node:
            raise Invalid(
                "properties and additionalProperties cannot both be given",
                field=child_path(where, "additionalProperties"),
            )
        properties = node["properties"]
        if not isinstance(properties, dict):
            raise Invalid("want a mapping", field=child_path(where, "properties"))
        for name, child in properties.items():
            check_structural(child, f"{where}.properties.{name}", in_logic=in_logic)
    if kind == "array" and not in_logic and not isinstance(node.get("items"), dict):
        raise Invalid("required: an array's items schema", field=child_path(where, "items"))
    if isinstance(node.get("items"), dict):
        check_structural(node["items"], f"{where}.items", in_logic=in_logic)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        check_structural(extra, f"{where}.additionalProperties", in_logic=in_logic)
    elif extra is not None and not isinstance(extra, bool):
        raise Invalid(
            "want a schema or true/false", field=child_path(where, "additionalProperties")
        )
    for key in ("allOf", "anyOf", "oneOf"):
        if key in node:
            if not isinstance(node[key], list):
                raise Invalid("want a list of schemas", field=child_path(where, key))
            for i, child in enumerate(node[key]):
                check_structural(child, f"{where}.{key}[{i}]", in_logic=True)
    if "not" in node:
        check_structural(node["not"], f"{where}.not", in_logic=True)
    if "pattern" in node:
        if not isinstance(node["pattern"], str):
            raise Invalid("want a regular expression", field=child_path(where, "pattern"))
        try:
            compile_pattern(node["pattern"])
        except Invalid as exc:
            raise Invalid(str(exc), field=child_path(where, "pattern")) from None
    if "required" in node and not (
        isinstance(node["required"], list) and all(isinstance(r, str) for r in node["required"])
    ):
        raise Invalid("want a list of field names", field=child_path(where, "required"))
