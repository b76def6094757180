"""Kinds as data: a `Kind` as an `apiextensions.k8s.io/v1` `CustomResourceDefinition`, and
back.

    crd = crd_of(PROCESS)        # what a Python-registered kind publishes in the store
    kind = kind_of(crd)          # a kind that validates by the CRD's openAPIV3Schema

`crd_of` builds the CRD of a kind: its names, scope, one served and stored version, the
status and scale subresources, printer columns, and an `openAPIV3Schema` made from the
kind's pydantic models (`openapi_schema`): pydantic's JSON schema turned into a Kubernetes
*structural* schema (every `$ref` inlined, `Optional` as `nullable`, any-value fields as
`x-kubernetes-preserve-unknown-fields`, descriptions from the fields' docstrings, and the
list types a field declares with `Field(json_schema_extra=list_map("name"))` or
`list_set()`, which server-side apply reads through `apply_schema(kind)`).

`kind_of` makes a `Kind` of a CRD, whose validator (`SchemaValidator`) fills the schema's
`default`s, then checks the object with the `jsonschema` library; the first refused value
is an `Invalid` naming its path (`spec.replicas`), an unknown field with the nearest valid
name, as pydantic-backed kinds do. `CRD` is the kind of the CRDs themselves: a CRD that is
written is checked by `check_crd` (`setpoint.model.crd_check`: name, group, names,
versions, a structural schema).

Pure: no I/O, no clock. pydantic and jsonschema are imported on first use only.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from setpoint.errors import Invalid
from setpoint.model.admission import child_path, unknown_field_message
from setpoint.model.crd_check import FIELD_PATH, allows_any, check_crd
from setpoint.model.kinds import Kind, PrinterColumn, ScaleSubresource
from setpoint.model.meta import Object
from setpoint.model.patterns import compile_pattern

if TYPE_CHECKING:
    from pydantic import BaseModel

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CATEGORIES = ["all", "setpoint"]
"""The categories every published CRD names (`kubectl get all`, `kubectl get setpoint`)."""

READY_PATH = '.status.conditions[?(@.type=="Ready")].status'
AGE_PATH = ".metadata.creationTimestamp"


# -- Kind -> CRD -----------------------------------------------------------------


def crd_of(kind: Kind) -> Object:
    """The `CustomResourceDefinition` that describes `kind` (a kind with pydantic models, or
    one made by `kind_of`)."""
    if not kind.group:
        raise Invalid(f"{kind.kind} is in the core group: a CRD needs a group", field="apiVersion")
    schema = openapi_schema(kind)
    subresources: dict[str, Any] = {}
    if kind.status_subresource if kind.validator else "status" in schema.get("properties", {}):
        subresources["status"] = {}
    if kind.scale is not None:
        scale: dict[str, str] = {
            "specReplicasPath": "." + kind.scale.spec_replicas_path,
            "statusReplicasPath": "." + kind.scale.status_replicas_path,
        }
        if kind.scale.label_selector_path:
            scale["labelSelectorPath"] = "." + kind.scale.label_selector_path
        subresources["scale"] = scale
    version: dict[str, Any] = {
        "name": kind.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if subresources:
        version["subresources"] = subresources
    version["additionalPrinterColumns"] = printer_columns(kind, schema)
    names: dict[str, Any] = {
        "plural": kind.plural,
        "singular": kind.singular,
        "kind": kind.kind,
        "listKind": kind.kind + "List",
        "categories": list(CATEGORIES),
    }
    if kind.short_names:
        names["shortNames"] = list(kind.short_names)
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{kind.group}"},
        "spec": {
            "group": kind.group,
            "names": names,
            "scope": "Namespaced" if kind.namespaced else "Cluster",
            "versions": [version],
        },
    }


def printer_columns(kind: Kind, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """`additionalPrinterColumns`: Ready, the kind's columns (typed by the schema), Age."""
    columns: list[dict[str, Any]] = [{"name": "Ready", "type": "string", "jsonPath": READY_PATH}]
    for column in kind.columns:
        node = _schema_at(schema, column.path.split("."))
        kind_of_value = node.get("type") if node else None
        cell_type = kind_of_value if kind_of_value in ("integer", "number", "boolean") else "string"
        entry: dict[str, Any] = {
            "name": column.name,
            "type": cell_type,
            "jsonPath": "." + column.path,
        }
        if node and node.get("description"):
            entry["description"] = node["description"].split("\n\n")[0]
        columns.append(entry)
    columns.append({"name": "Age", "type": "date", "jsonPath": AGE_PATH})
    return columns


def _schema_at(schema: dict[str, Any], path: list[str]) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in path:
        node = (node or {}).get("properties", {}).get(part)
    return node


def openapi_schema(kind: Kind) -> dict[str, Any]:
    """The structural `openAPIV3Schema` of a whole object of `kind`: apiVersion, kind,
    metadata, and spec and status (or the body's fields) from its models. A kind made
    by `kind_of` answers its CRD's schema."""
    from setpoint.model.schema import model_of

    if isinstance(kind.validator, SchemaValidator):
        return copy.deepcopy(kind.validator.schema)
    properties: dict[str, Any] = {
        "apiVersion": {
            "type": "string",
            "description": "The versioned schema of this representation of an object.",
        },
        "kind": {"type": "string", "description": "The REST resource this object represents."},
        "metadata": {"type": "object"},
    }
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if kind.body is not None:
        body = structural(model_json_schema(model_of(kind.body)))
        properties.update(body.get("properties", {}))
        if body.get("required"):
            out["required"] = body["required"]
        if body.get("description"):
            out["description"] = body["description"]
    elif kind.spec is None and kind.status is None:
        out["x-kubernetes-preserve-unknown-fields"] = True
    for name, ref in (("spec", kind.spec), ("status", kind.status)):
        if ref is not None:
            properties[name] = structural(model_json_schema(model_of(ref)))
    if kind.spec is not None and kind.status is None:
        properties["status"] = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return out


def list_map(*keys: str) -> dict[str, Any]:
    """The schema markers of a list whose elements are objects told apart by `keys`: server-side
    apply merges it element by element (`x-kubernetes-list-type: map`)."""
    return {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}


def list_set() -> dict[str, Any]:
    """The schema markers of a list of distinct scalars, merged value by value by
    server-side apply (`x-kubernetes-list-type: set`)."""
    return {"x-kubernetes-list-type": "set"}


@functools.lru_cache(maxsize=256)
def apply_schema(kind: Kind) -> dict[str, Any]:
    """`openapi_schema(kind)`, built once per kind: what server-side apply reads the list
    types from (`setpoint.model.managed_fields`). Shared: do not change it."""
    return openapi_schema(kind)


def model_json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """pydantic's JSON schema of `model` (wire names), each field described by its docstring."""
    schema: dict[str, Any] = json.loads(_model_json_schema_text(model))
    return schema


@functools.cache
def _model_json_schema_text(model: type[BaseModel]) -> str:
    from setpoint.model.schema import json_schema_of

    return json.dumps(json_schema_of(model))


def structural(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema as a Kubernetes structural schema (see the module docstring)."""
    defs = schema.get("$defs", {})
    return _convert(schema, defs, ())


_KEPT = (
    "description",
    "enum",
    "format",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
)
"""What a pydantic schema node keeps as it is; a model marks how server-side apply merges
a list with `Field(json_schema_extra=list_map("name"))` (`list_map`, `list_set`)."""


def _convert(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    if "$ref" in node:
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        own = {k: v for k, v in node.items() if k != "$ref"}
        if name in seen:  # a recursive model: below here, anything goes
            target: dict[str, Any] = {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
            }
        else:
            target = _convert(defs[name], defs, (*seen, name))
        return {**target, **_convert_keywords(own, defs, seen)}
    options = node.get("anyOf") or node.get("oneOf")
    if options is None and isinstance(node.get("type"), list):
        options = [{"type": t} for t in node["type"]]
    if options is None:
        out = _convert_keywords(node, defs, seen)
        if not out.get("type") and not allows_any(out):
            out["x-kubernetes-preserve-unknown-fields"] = True  # Any: a value of any type
        return out
    rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf", "type")}
    values = [o for o in options if o.get("type") != "null"]
    if len(values) == 1:
        out = _convert({**values[0], **rest}, defs, seen)
    else:
        out = {
            **_union([_convert(v, defs, seen) for v in values]),
            **_convert_keywords(rest, defs, seen),
        }
    if len(values) < len(options):
        out["nullable"] = True
    return out


def _union(options: list[dict[str, Any]]) -> dict[str, Any]:
    types = {o.get("type") for o in options}
    if types == {"integer", "string"}:
        return {"x-kubernetes-int-or-string": True}
    if types <= {"integer", "number"}:
        return {"type": "number"}
    if types == {"object"}:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {"x-kubernetes-preserve-unknown-fields": True}


def _convert_keywords(
    node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "type" in node:
        out["type"] = node["type"]
    for key in _KEPT:
        if key in node:
            out[key] = node[key]
    if "const" in node:
        out["enum"] = [node["const"]]
    for bound, inclusive in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if bound in node and not isinstance(node[bound], bool):
            out[inclusive] = node[bound]
            out[bound] = True
    if "default" in node and node["default"] is not None:
        out["default"] = node["default"]
    if "properties" in node:
        out["properties"] = {
            name: _convert(child, defs, seen) for name, child in node["properties"].items()
        }
    if "items" in node and isinstance(node["items"], dict):
        out["items"] = _convert(node["items"], defs, seen)
    elif out.get("type") == "array":
        out["items"] = dict(_ANY)  # a tuple (prefixItems) or a list of anything
    extra = node.get("additionalProperties")
    if extra is None and "patternProperties" in node:
        extra = next(iter(node["patternProperties"].values()))
    if isinstance(extra, dict) and extra:
        out["additionalProperties"] = _convert(extra, defs, seen)
    elif extra is True or extra == {}:  # a dict of anything (or extra="allow")
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


_ANY = {"x-kubernetes-preserve-unknown-fields": True}


# -- CRD -> Kind -----------------------------------------------------------------


def kind_of(crd: Object) -> Kind:
    """The kind a CRD defines (its storage version), validating by its `openAPIV3Schema`.
    `Invalid` naming the field when the CRD is not a valid one (`check_crd`)."""
    check_crd(crd)
    spec = crd["spec"]
    names = spec["names"]
    version = next(v for v in spec["versions"] if v.get("storage"))
    schema = version["schema"]["openAPIV3Schema"]
    subresources = version.get("subresources") or {}
    scale = subresources.get("scale")
    return Kind(
        f"{spec['group']}/{version['name']}",
        names["kind"],
        plural=names["plural"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        scale=None
        if scale is None
        else ScaleSubresource(
            scale["specReplicasPath"].lstrip("."),
            scale["statusReplicasPath"].lstrip("."),
            (scale.get("labelSelectorPath") or "").lstrip(".") or None,
        ),
        columns=tuple(
            PrinterColumn(str(c["name"]).upper(), c["jsonPath"].lstrip("."))
            for c in version.get("additionalPrinterColumns") or ()
            if c["jsonPath"] not in (READY_PATH, AGE_PATH) and FIELD_PATH.fullmatch(c["jsonPath"])
        ),
        validator=SchemaValidator(json.dumps(schema, sort_keys=True)),
        status_subresource="status" in subresources,
    )


@dataclass(frozen=True)
class SchemaValidator:
    """Validates objects by an `openAPIV3Schema` (kept as JSON text, so it compares and
    hashes by value): defaults first, then the schema; unknown fields are refused where
    the schema does not preserve them."""

    text: str

    @property
    def schema(self) -> dict[str, Any]:
        return _compiled(self.text)[0]

    def validate(self, obj: Object) -> None:
        schema, checker = _compiled(self.text)
        body = {k: v for k, v in obj.items() if k != "metadata"}
        apply_defaults(schema, body)
        _check(checker, body, "")
        obj.update(body)

    def validate_status(self, status: Any) -> Any:
        schema, checker = _compiled(self.text)
        node = schema.get("properties", {}).get("status")
        if node is None:
            if schema.get("x-kubernetes-preserve-unknown-fields"):
                return status
            raise Invalid(
                unknown_field_message("status", schema.get("properties", {})), field="status"
            )
        status = copy.deepcopy(status)
        wrapped = {"status": status}
        apply_defaults({"properties": {"status": node}}, wrapped)
        _check(checker, wrapped, "", only="status")
        return wrapped["status"]


@functools.cache
def _compiled(text: str) -> tuple[dict[str, Any], Any]:
    """The schema of `text`, and a jsonschema (draft 4, as OpenAPI 3.0's) validator of
    the object without its metadata."""
    from jsonschema import Draft4Validator, validators

    schema = json.loads(text)
    root = _draft4(schema)
    root.setdefault("properties", {})
    for envelope in ("apiVersion", "kind"):
        root["properties"].setdefault(envelope, {"type": "string"})
    root["properties"].pop("metadata", None)
    if "required" in root:
        root["required"] = [r for r in root["required"] if r != "metadata"]
    # `pattern` as Kubernetes reads it (RE2), in linear time: no catastrophic backtracking.
    checker = validators.extend(Draft4Validator, {"pattern": _pattern})
    return schema, checker(root)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Any:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not compile_pattern(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _draft4(node: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 (structural) schema as a draft 4 JSON schema that refuses unknown
    fields: nullable as a null type, int-or-string as anyOf, no x- extensions."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key.startswith("x-") or key in ("nullable", "default", "format", "description"):
            continue
        if key == "properties":
            out[key] = {name: _draft4(child) for name, child in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = _draft4(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_draft4(child) for child in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if out.get("type") == "object" and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    if node.get("nullable"):
        if "type" in out:
            out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        if "anyOf" in out:
            out["anyOf"] = [*out["anyOf"], {"type": "null"}]
    return out


def apply_defaults(schema: dict[str, Any], value: Any) -> None:
    """Fill, in place, every field the schema gives a `default` and `value` lacks, in
    objects that are there (as the Kubernetes API server defaults)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        for name, child in properties.items():
            if name not in value and "default" in child:
                value[name] = copy.deepcopy(child["default"])
            if name in value:
                apply_defaults(child, value[name])
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, child_value in value.items():
                if name not in properties:
                    apply_defaults(extra, child_value)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(schema["items"], item)


def _check(checker: Any, value: Any, root: str, only: str | None = None) -> None:
    from jsonschema.exceptions import best_match

    errors = checker.iter_errors(value)
    if only is not None:
        errors = (e for e in errors if list(e.absolute_path)[:1] == [only])
    error = best_match(errors)
    if error is None:
        return
    path = root
    for part in error.absolute_path:
        path = child_path(path, part)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties") or {})
        for name in error.instance:
            if name not in known:
                raise Invalid(unknown_field_message(str(name), known), field=child_path(path, name))
    if error.validator == "required":
        missing = next(n for n in error.validator_value if n not in error.instance)
        raise Invalid("Field required", field=child_path(path, missing))
    raise Invalid(_message(error), field=path or None)


def _message(error: Any) -> str:
    kind = error.validator
    if kind == "type":
        want = error.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        return f"want {want}, got {json.dumps(error.instance)[:60]}"
    if kind == "anyOf":
        return f"want an integer or a string, got {json.dumps(error.instance)[:60]}"
    return str(error.message)


@dataclass(frozen=True)
class _CrdValidator:
    """The validation of CRDs themselves: `check_crd`; a new CRD (one without a status) is
    given the status Kubernetes gives an accepted one (its names, `Established`), which
    `kubectl wait --for condition=established` waits for."""

    def validate(self, obj: Object) -> None:
        check_crd(obj)
        if obj.get("status") is None:
            obj["status"] = accepted_status(obj)

    def validate_status(self, status: Any) -> Any:
        if not isinstance(status, dict):
            raise Invalid("want a mapping", field="status")
        return status


def accepted_status(crd: Object) -> dict[str, Any]:
    """The status of a CRD setpoint serves: its names accepted, Established, its stored
    version."""
    spec = crd["spec"]
    names = dict(spec["names"])
    names.setdefault("singular", names["kind"].lower())
    names.setdefault("listKind", names["kind"] + "List")
    stored = [v["name"] for v in spec["versions"] if v.get("storage")]
    return {
        "acceptedNames": names,
        "storedVersions": stored,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ],
    }


CRD = Kind(
    CRD_API_VERSION,
    "CustomResourceDefinition",
    plural="customresourcedefinitions",
    namespaced=False,
    short_names=("crd", "crds"),
    validator=_CrdValidator(),
)
"""The kind of CRDs (cluster-scoped, as Kubernetes): a kind defined as data."""
