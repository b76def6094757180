"""Kubernetes' protobuf request bodies, read as the JSON objects they stand for, for the kinds
kubectl's generators send that way: `kubectl create configmap`, `create secret` and `create
namespace` send `application/vnd.kubernetes.protobuf` (and accept JSON back). Pure: bytes in,
an object out.

The body is kube-apiserver's envelope: the magic `k8s\\0`, then a `runtime.Unknown` message
(its `typeMeta` names the apiVersion and kind, `raw` holds the object's own message). The
object's fields are read by the field numbers of k8s.io/api's and apimachinery's
generated.proto (`MESSAGES`); their generated Go code writes every non-pointer field, empty or
not, so empty strings, zeros and the zero time are left out, as their JSON leaves them out.
A kind not in `KINDS`, a field not in its message, or a malformed body is refused with a
clear message (send JSON instead): nothing is dropped silently.

    decode(body)  # -> {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {...}, ...}
"""

from __future__ import annotations

import base64
import datetime
from typing import Any

from setpoint.errors import BadRequest, UnsupportedMediaType

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

Message = dict[int, tuple[str, Any]]
"""Field number -> (JSON name, type): `string`, `bytes`, `int`, `bool`, `time`, `map` (of
strings), `bytes_map` (strings to bytes), a nested `Message`, or a 1-tuple of either (a
repeated field)."""

TIME: Message = {1: ("seconds", "int"), 2: ("nanos", "int")}
OWNER_REFERENCE: Message = {
    5: ("apiVersion", "string"),
    1: ("kind", "string"),
    3: ("name", "string"),
    4: ("uid", "string"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
OBJECT_META: Message = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    4: ("selfLink", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    8: ("creationTimestamp", "time"),
    9: ("deletionTimestamp", "time"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", "map"),
    12: ("annotations", "map"),
    13: ("ownerReferences", (OWNER_REFERENCE,)),
    14: ("finalizers", ("string",)),
}
NAMESPACE_CONDITION: Message = {
    1: ("type", "string"),
    2: ("status", "string"),
    4: ("lastTransitionTime", "time"),
    5: ("reason", "string"),
    6: ("message", "string"),
}
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "ConfigMap"): {
        1: ("metadata", OBJECT_META),
        2: ("data", "map"),
        3: ("binaryData", "bytes_map"),
        4: ("immutable", "bool"),
    },
    ("v1", "Secret"): {
        1: ("metadata", OBJECT_META),
        2: ("data", "bytes_map"),
        3: ("type", "string"),
        4: ("stringData", "map"),
        5: ("immutable", "bool"),
    },
    ("v1", "Namespace"): {
        1: ("metadata", OBJECT_META),
        2: ("spec", {1: ("finalizers", ("string",))}),
        3: ("status", {1: ("phase", "string"), 2: ("conditions", (NAMESPACE_CONDITION,))}),
    },
}
TYPE_META: Message = {1: ("apiVersion", "string"), 2: ("kind", "string")}
"""runtime.TypeMeta, field 1 of the envelope's runtime.Unknown (2: raw, 3: contentEncoding)."""


def decode(body: bytes) -> dict[str, Any]:
    """The object a protobuf request body holds (see the module docstring)."""
    if not body.startswith(MAGIC):
        raise BadRequest("the protobuf body does not start with Kubernetes' magic 'k8s\\0'")
    type_meta: dict[str, Any] = {}
    raw = b""
    for number, wire, value in _fields(body[len(MAGIC) :], "runtime.Unknown"):
        if number == 1 and wire == 2:
            type_meta = _message(value, TYPE_META, "runtime.TypeMeta")
        elif number == 2 and wire == 2:
            raw = value
        elif number == 3 and wire == 2 and value:
            raise UnsupportedMediaType(
                f"protobuf bodies encoded as {value.decode(errors='replace')!r}"
            )
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    message = KINDS.get((api_version, kind))
    if message is None:
        readable = ", ".join(f"{v} {k}" for v, k in KINDS)
        raise UnsupportedMediaType(
            f"setpoint reads protobuf bodies of {readable} only, not {api_version} {kind}: "
            "send it as application/json"
        )
    return {"apiVersion": api_version, "kind": kind, **_message(raw, message, kind)}


def _message(data: bytes, message: Message, name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, wire, value in _fields(data, name):
        if number not in message:
            raise UnsupportedMediaType(
                f"field {number} of the protobuf {name} is not one setpoint reads: "
                "send it as application/json"
            )
        field, type_ = message[number]
        repeated = isinstance(type_, tuple)
        item = _value(value, wire, type_[0] if repeated else type_, f"{name}.{field}")
        if repeated:
            out.setdefault(field, []).append(item)
        elif type_ in ("map", "bytes_map"):
            out.setdefault(field, {}).update(item)
        else:
            out[field] = item
    return {k: v for k, v in out.items() if v not in ("", 0, None, {}, [])}


def _value(value: Any, wire: int, type_: Any, where: str) -> Any:
    expected = 0 if type_ in ("int", "bool") else 2
    if wire != expected:
        raise BadRequest(f"the protobuf field {where} has wire type {wire}, not {expected}")
    if type_ == "int":
        return value - (1 << 64) if value >= 1 << 63 else value
    if type_ == "bool":
        return bool(value)
    if type_ == "string":
        return _text(value, where)
    if type_ == "bytes":
        return base64.b64encode(value).decode()
    if type_ == "time":
        return _time(_message(value, TIME, where))
    if type_ in ("map", "bytes_map"):
        values = "bytes" if type_ == "bytes_map" else "string"
        entry = _message(value, {1: ("key", "string"), 2: ("value", values)}, where)
        return {entry.get("key", ""): entry.get("value", "")}
    return _message(value, type_, where)


def _time(fields: dict[str, Any]) -> str | None:
    """A `metav1.Time` as its JSON (RFC 3339, seconds); None for the zero time."""
    seconds = fields.get("seconds", 0)
    if not seconds:
        return None
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(value: bytes, where: str) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise BadRequest(f"the protobuf field {where} is not UTF-8 text") from None


def _fields(data: bytes, name: str) -> list[tuple[int, int, Any]]:
    """The (number, wire type, value) of each field of a message: an int for a varint, the
    bytes for a length-delimited field (the only wire types Kubernetes' objects use)."""
    fields = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at, name)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = _varint(data, at, name)
        elif wire == 2:
            length, at = _varint(data, at, name)
            if at + length > len(data):
                raise BadRequest(f"the protobuf {name} ends inside its field {number}")
            value, at = data[at : at + length], at + length
        else:
            raise BadRequest(f"the protobuf {name} has field {number} of wire type {wire}")
        fields.append((number, wire, value))
    return fields


def _varint(data: bytes, at: int, name: str) -> tuple[int, int]:
    value = shift = 0
    while at < len(data) and shift < 70:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    raise BadRequest(f"the protobuf {name} ends inside a number")
