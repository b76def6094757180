"""Object metadata: the Kubernetes rules for names, labels, annotations and references.

Pure functions over plain dicts (the wire form of every object). Each check raises
`setpoint.errors.Invalid` naming the field path; nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from setpoint.errors import Invalid
from setpoint.model.admission import refuse_unknown_fields

Object = dict[str, Any]
"""A resource in wire form: apiVersion, kind, metadata, spec, status."""

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")

MAX_ANNOTATIONS_BYTES = 256 * 1024

METADATA_FIELDS = (
    "name",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generateName",
    "managedFields",
    "selfLink",
)
"""The fields `metadata` may hold (Kubernetes' ObjectMeta); any other is refused."""


def check_dns1123_subdomain(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("required: a lower-case DNS-1123 subdomain", field=field)
    if len(value) > 253:
        raise Invalid(f"{value[:20]!r}...: must be no more than 253 characters", field=field)
    if not _DNS1123_SUBDOMAIN.fullmatch(value):
        raise Invalid(
            f"{value!r}: a lower-case DNS-1123 subdomain must consist of lower case "
            "alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character",
            field=field,
        )
    return value


def check_dns1123_label(value: object, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise Invalid("required: a lower-case DNS-1123 label", field=field)
    if len(value) > 63 or not _DNS1123_LABEL.fullmatch(value):
        raise Invalid(
            f"{value!r}: a DNS-1123 label must be at most 63 lower case alphanumeric "
            "characters or '-', starting and ending with an alphanumeric character",
            field=field,
        )
    return value


def check_qualified_name(key: object, field: str) -> str:
    """A label/annotation key or finalizer: `[prefix/]name`, prefix a DNS subdomain."""
    if not isinstance(key, str) or not key:
        raise Invalid("must be a non-empty string", field=field)
    prefix, _, name = key.rpartition("/")
    if "/" in key and not prefix:
        raise Invalid(f"{key!r}: prefix part must be non-empty", field=field)
    if prefix:
        check_dns1123_subdomain(prefix, field)
    if len(name) > 63 or not _QUALIFIED_NAME.fullmatch(name):
        raise Invalid(
            f"{key!r}: name part must be at most 63 characters: alphanumerics, '-', '_' "
            "or '.', starting and ending with an alphanumeric",
            field=field,
        )
    return key


def check_label_value(value: object, field: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{value!r}: a label value must be a string", field=field)
    if len(value) > 63 or not _LABEL_VALUE.fullmatch(value):
        raise Invalid(
            f"{value!r}: a label value must be empty or at most 63 characters: "
            "alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric",
            field=field,
        )
    return value


def _check_string_map(value: object, field: str) -> Mapping[str, object]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise Invalid("must be a map of string keys to string values", field=field)
    return value


def check_metadata(obj: Object, *, namespaced: bool) -> None:
    """Check the user-writable metadata of `obj` in place (fills `namespace` default)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        raise Invalid("required: an object with at least a name", field="metadata")
    refuse_unknown_fields(meta, METADATA_FIELDS, "metadata")
    check_dns1123_subdomain(meta.get("name"), "metadata.name")
    if namespaced:
        meta["namespace"] = check_dns1123_label(
            meta.get("namespace") or "default", "metadata.namespace"
        )
    elif meta.get("namespace"):
        raise Invalid("must be empty: this kind is cluster-scoped", field="metadata.namespace")
    else:
        meta.pop("namespace", None)

    for key, val in _check_string_map(meta.get("labels"), "metadata.labels").items():
        check_qualified_name(key, f"metadata.labels[{key!r}]")
        check_label_value(val, f"metadata.labels[{key!r}]")

    size = 0
    for key, val in _check_string_map(meta.get("annotations"), "metadata.annotations").items():
        check_qualified_name(key, f"metadata.annotations[{key!r}]")
        if not isinstance(val, str):
            raise Invalid(
                "annotation values must be strings", field=f"metadata.annotations[{key!r}]"
            )
        size += len(key) + len(val.encode())
    if size > MAX_ANNOTATIONS_BYTES:
        raise Invalid(
            f"Too long: must have at most {MAX_ANNOTATIONS_BYTES} bytes",  # Kubernetes' words
            field="metadata.annotations",
        )

    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list):
        raise Invalid("must be a list of qualified names", field="metadata.finalizers")
    for i, fin in enumerate(finalizers):
        check_qualified_name(fin, f"metadata.finalizers[{i}]")

    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list):
        raise Invalid("must be a list", field="metadata.ownerReferences")
    for i, ref in enumerate(owners):
        field = f"metadata.ownerReferences[{i}]"
        if not isinstance(ref, dict):
            raise Invalid("must be an object", field=field)
        for required in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref.get(required), str) or not ref[required]:
                raise Invalid("required", field=f"{field}.{required}")
        for flag in ("controller", "blockOwnerDeletion"):
            if flag in ref and not isinstance(ref[flag], bool):
                raise Invalid("must be a boolean", field=f"{field}.{flag}")
    if sum(1 for ref in owners if ref.get("controller")) > 1:
        raise Invalid(
            "only one reference can have controller set to true", field="metadata.ownerReferences"
        )


def object_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    """(apiVersion, kind, namespace, name): an object's identity in the store."""
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])
