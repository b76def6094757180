"""What a request asks for, read from its path, query and headers: which resource, field
selectors, list paging, patch types, table output. Pure: no I/O, no store.

* `parse_path` splits `/api/v1/namespaces/NS/RESOURCE/NAME/SUB` (and the `/apis/G/V/...`
  form) into a `ResourcePath`.
* `FieldSelector` reads `fieldSelector` (`metadata.name=x,type!=Normal`) and keeps only
  the fields the Kubernetes API server supports for the kind: `metadata.name`,
  `metadata.namespace`, and for an Event those `kubectl describe` uses.
* `ContinueToken` is the opaque `continue` of a paged list.
* `answer_form` reads the Accept header: the objects, a Table, or their metadata only.
* `flag` reads a boolean parameter (`watch`, `force`, ...) as the Kubernetes API server does.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from setpoint.errors import BadRequest
from setpoint.model import Kind, Object

PATCH_TYPES = {
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
    # kubectl sends a strategic merge patch for kinds it finds in the OpenAPI document; on
    # kinds with no patch strategies (all of ours: lists are replaced) it is a merge patch.
    "application/strategic-merge-patch+json": "merge",
    "application/apply-patch+yaml": "apply",
    "application/apply-patch+json": "apply",
}
"""Patch content types and what each one means."""


@dataclass(frozen=True, slots=True)
class ResourcePath:
    """One resource request's path: `api_version` (`v1` or `group/version`), `namespace`
    (None: all namespaces, or a cluster-scoped kind), `resource` (a plural), `name` and
    `subresource` (`status`, `scale`) when given."""

    api_version: str
    resource: str
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None


def parse_path(api_version: str, segments: list[str]) -> ResourcePath | None:
    """The resource path after the group-version prefix, or None if it is not one."""
    if segments and segments[0] == "namespaces" and len(segments) >= 3:
        namespace: str | None = segments[1]
        segments = segments[2:]
    else:
        namespace = None
    if not 1 <= len(segments) <= 3 or not all(segments):
        return None
    resource, *rest = segments
    name = rest[0] if rest else None
    subresource = rest[1] if len(rest) > 1 else None
    return ResourcePath(api_version, resource, namespace, name, subresource)


_COMMON_FIELDS = ("metadata.name", "metadata.namespace")
_EVENT_FIELDS = {
    "involvedObject.kind": "involvedObject.kind",
    "involvedObject.namespace": "involvedObject.namespace",
    "involvedObject.name": "involvedObject.name",
    "involvedObject.uid": "involvedObject.uid",
    "involvedObject.apiVersion": "involvedObject.apiVersion",
    "involvedObject.resourceVersion": "involvedObject.resourceVersion",
    "involvedObject.fieldPath": "involvedObject.fieldPath",
    "reason": "reason",
    "reportingComponent": "reportingComponent",
    "source": "source.component",
    "type": "type",
}
"""Event fields a field selector may name (as the API server's), and where each lives."""


@dataclass(frozen=True, slots=True)
class FieldSelector:
    """Requirements `(path, equal, value)`: the value at `path` equals (or not) `value`."""

    requirements: tuple[tuple[str, bool, str], ...] = ()

    @classmethod
    def parse(cls, text: str | None, kind: Kind) -> FieldSelector:
        """Read `text`; `BadRequest` for a field the kind does not support or bad syntax."""
        if not text:
            return cls()
        supported = {name: name for name in _COMMON_FIELDS}
        if kind.api_version == "v1" and kind.kind == "Event":
            supported.update(_EVENT_FIELDS)
        out = []
        for term in text.split(","):
            if not term.strip():
                continue
            field, equal, value = _split_term(term)
            field = field.strip()
            if field not in supported:
                raise BadRequest(
                    f'"{field}" is not a known field selector: only '
                    + ", ".join(f'"{f}"' for f in supported)
                )
            out.append((supported[field], equal, value.strip()))
        return cls(tuple(out))

    def matches(self, obj: Object) -> bool:
        for path, equal, value in self.requirements:
            if (_value_at(obj, path) == value) != equal:
                return False
        return True

    def __bool__(self) -> bool:
        return bool(self.requirements)


def _split_term(term: str) -> tuple[str, bool, str]:
    """`field=value`, `field==value` or `field!=value` as (field, equal, value)."""
    for op in ("!=", "==", "="):
        field, found, value = term.partition(op)
        if found:
            return field, op != "!=", value
    raise BadRequest(f"invalid field selector {term!r}: want field=value or field!=value")


def _value_at(obj: Object, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    return "" if node is None else str(node)


@dataclass(frozen=True, slots=True)
class ContinueToken:
    """Where the next page of a list starts: the snapshot it reads (`snapshot`, an id the
    server keeps), the offset into it, and the snapshot's revision."""

    snapshot: str
    offset: int
    revision: int

    def encode(self) -> str:
        raw = json.dumps({"s": self.snapshot, "o": self.offset, "rv": self.revision})
        return base64.urlsafe_b64encode(raw.encode()).decode()

    @classmethod
    def decode(cls, text: str) -> ContinueToken:
        try:
            data = json.loads(base64.urlsafe_b64decode(text.encode()))
            return cls(str(data["s"]), int(data["o"]), int(data["rv"]))
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise BadRequest(f"continue {text[:40]!r}: not a continue token") from None


def flag(params: Mapping[str, str], name: str) -> bool:
    """The boolean parameter `name`, read as the Kubernetes API server reads one: absent,
    `0` or `false` (any case) is false, any other value is true (`watch=True`, as
    kubernetes_asyncio sends it, and a bare `watch=`)."""
    value = params.get(name)
    return value is not None and value != "0" and value.lower() != "false"


def non_negative_int(params: dict[str, str], name: str) -> int | None:
    """The query parameter `name` as a whole number >= 0, None if absent; else BadRequest."""
    value = params.get(name)
    if value is None or value == "":
        return None
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise BadRequest(f"{name}={value!r}: want a whole number >= 0")
    return number


AnswerForm = Literal["Object", "Table", "PartialObjectMetadata"]
"""How a read is answered: the objects themselves, a meta.k8s.io Table of them, or their
metadata only (`PartialObjectMetadata`, in a `PartialObjectMetadataList` for a list)."""


def answer_form(accept: str) -> AnswerForm:
    """What an Accept header asks for: a Table if any of its types asks for one (kubectl
    get does), else metadata only if one asks `as=PartialObjectMetadata` or
    `as=PartialObjectMetadataList` of meta.k8s.io (metadata-only clients do), else the
    objects."""
    asked: set[str] = set()
    for part in accept.split(","):
        params = {p.strip() for p in part.split(";")[1:]}
        if "g=meta.k8s.io" in params:
            asked |= {p.removeprefix("as=") for p in params if p.startswith("as=")}
    if "Table" in asked:
        return "Table"
    if asked & {"PartialObjectMetadata", "PartialObjectMetadataList"}:
        return "PartialObjectMetadata"
    return "Object"


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a meta.k8s.io Table (kubectl get does)."""
    return answer_form(accept) == "Table"


def media_type(content_type: str | None) -> str:
    """The bare media type of a Content-Type header, lowercased."""
    return (content_type or "").split(";", 1)[0].strip().lower()
