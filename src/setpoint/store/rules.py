"""The write rules every backend applies: validation, server-set metadata, CAS, generation,
finalizers, managed fields of plain writes. Pure: each function takes the current stored
object and the request and returns what to write, or raises; the backend supplies the
revision and does the I/O.

A backend runs a write as: `decide` inside its transaction (so the compare-and-swap
sees the latest committed state), then `stamp` with the revision it assigns. A dry run
(`WriteOptions.dry_run`) is the same `prepare` and `decide` on the object as it is, and
nothing more (`Backend._write`).
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from setpoint.clock import rfc3339
from setpoint.errors import AlreadyExists, Conflict, Invalid
from setpoint.model import Kind, Object, Registry, apply_patch, codec
from setpoint.model.crd import apply_schema
from setpoint.model.managed_fields import check_entries
from setpoint.model.managed_fields import update as record_update
from setpoint.model.meta import object_key
from setpoint.store.base import NO_OPTIONS, WriteOptions
from setpoint.store.keys import Key as Key
from setpoint.store.keys import key_of as key_of
from setpoint.store.keys import not_found as not_found

if TYPE_CHECKING:
    from setpoint.store.base import EventType, Verb


MAX_OBJECT_BYTES = 3 * 1024 * 1024 // 2  # 1.5 MiB, as etcd's default request limit

_USER_METADATA = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")
"""Metadata a writer gives (managedFields: server-side apply's, `setpoint.model.managed_fields`)."""

FOREGROUND_DELETION = "foregroundDeletion"
"""Finalizer of an owner whose dependents the garbage collector deletes first."""
ORPHAN = "orphan"
"""Finalizer of an owner whose dependents lose their owner reference instead of being deleted."""
PROPAGATION_FINALIZERS = {"Background": None, "Foreground": FOREGROUND_DELETION, "Orphan": ORPHAN}


@dataclass(frozen=True, slots=True)
class Write:
    """A write request, carried to the backend's transaction."""

    op: Verb
    key: Key
    kind: Kind
    obj: Object | None = None
    patch: Any = None
    patch_type: str = "merge"
    propagation: str = "Background"
    preconditions: dict[str, str] | None = None  # delete only: {"uid", "resourceVersion"}
    options: WriteOptions = NO_OPTIONS
    admitted: Object | None = None
    """An update's, patch's or status write's object as admission webhooks left it
    (`setpoint.store.webhooks`), decided on the object at its `metadata.resourceVersion`:
    written in place of what `op` would make of the current object, `Conflict` if that
    object has changed since."""


@dataclass(frozen=True, slots=True)
class Change:
    """What a write does: the object as it now is (for DELETED, its last state)."""

    type: EventType
    key: Key
    object: Object
    prev_labels: dict[str, str] | None


def encode(obj: Object) -> bytes:
    """The stored form; refuses objects over `MAX_OBJECT_BYTES`."""
    data = codec.encode(obj)
    if len(data) > MAX_OBJECT_BYTES:
        raise Invalid(
            f"object is {len(data)} bytes; the limit is {MAX_OBJECT_BYTES} bytes (1.5 MiB)"
        )
    return data


def prepare(registry: Registry, op: Verb, obj: Object, options: WriteOptions = NO_OPTIONS) -> Write:
    """Check an incoming object for create/update/update_status before any transaction."""
    if not isinstance(obj, dict):
        raise Invalid("an object must be a mapping")
    kind = registry.for_object(obj)
    obj = _private_copy(obj, kind)
    if op == "update_status":
        if not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name"):
            raise Invalid("required", field="metadata.name")
        obj["status"] = kind.validate_status(obj.get("status"))
        if options.record_fields:
            check_entries(obj)
        if kind.namespaced:
            obj["metadata"]["namespace"] = obj["metadata"].get("namespace") or "default"
    else:
        if op == "update":
            obj.pop("status", None)
        elif kind.status_on_create and obj.get("status") is None:
            obj["status"] = {}  # validated to the schema's defaults
        kind.validate(obj)
    if op in ("update", "update_status") and not obj["metadata"].get("resourceVersion"):
        raise Invalid("must be specified for an update", field="metadata.resourceVersion")
    return Write(op, object_key(obj), kind, obj=obj, options=options)


def decide(write: Write, current: Object | None, now: float) -> Change | None:
    """What `write` does to `current`; None when it changes nothing (no revision is used)."""
    if write.op == "create":
        if current is not None:
            _, kind, ns, name = write.key
            where = f' in namespace "{ns}"' if ns else ""
            raise AlreadyExists(f'{kind} "{name}" already exists{where}')
        return Change("ADDED", write.key, _created(write.obj, now), None)
    if current is None:
        raise not_found(write.key)
    if write.op == "delete":
        _check_preconditions(write.preconditions or {}, current)
        return _deleted(write.key, current, now, write.propagation)
    if write.admitted is not None:
        return _admitted(write, current, now)
    if write.op == "patch":
        return _patched(write, current, now)
    assert write.obj is not None
    _check_version(write.obj, current)
    if write.op == "update_status":
        return _change(write.key, current, _status_written(write, current, write.obj))
    return _updated(write.key, current, _recorded(write, current, write.obj, now))


def stamp(change: Change, revision: int) -> Change:
    """Record the revision the backend gave this change in its object."""
    change.object["metadata"]["resourceVersion"] = str(revision)
    return change


def _private_copy(obj: Object, kind: Kind) -> Object:
    """A copy of the caller's object that validation may change without touching theirs.
    Spec and status that a schema rebuilds are not copied; everything else is."""
    out: Object = {}
    for part, value in obj.items():
        if part == "metadata" and isinstance(value, dict):
            out[part] = {k: _copy(v) for k, v in value.items()}
        elif (part == "spec" and kind.spec) or (part == "status" and kind.status):
            out[part] = value
        else:
            out[part] = _copy(value)
    return out


_IMMUTABLE = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any) -> Any:
    """`copy.deepcopy` of `value`, quicker for the JSON data objects are made of (which
    shares no part and holds no cycle: a part met twice is copied twice)."""
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    return copy.deepcopy(value)


_ENVELOPE = ("apiVersion", "kind", "metadata", "spec", "status")


def _with_metadata(current: Object) -> Object:
    """A shallow copy of a private object with its own metadata, ready to change."""
    new = dict(current)
    new["metadata"] = dict(current["metadata"])
    return new


def _created(obj: Object | None, now: float) -> Object:
    assert obj is not None
    meta = obj["metadata"]
    for server_field in ("resourceVersion", "deletionTimestamp"):
        meta.pop(server_field, None)
    meta["uid"] = str(uuid.uuid4())
    meta["generation"] = 1
    meta["creationTimestamp"] = rfc3339(now)
    return obj


def _check_version(obj: Object, current: Object) -> None:
    wanted = obj["metadata"].get("resourceVersion")
    have = current["metadata"]["resourceVersion"]
    if wanted is not None and str(wanted) != have:
        _, kind, _, name = object_key(current)
        raise Conflict(
            f'Operation cannot be fulfilled on {kind} "{name}": the object has been modified '
            f"(resourceVersion {wanted}, now {have}); read the latest version and try again"
        )


def _check_preconditions(preconditions: dict[str, str], current: Object) -> None:
    """Delete preconditions, as Kubernetes' DeleteOptions: the object must still be the one
    the caller read (same uid) and, if given, unchanged since (same resourceVersion)."""
    meta = current["metadata"]
    for field, have in (("uid", meta["uid"]), ("resourceVersion", meta["resourceVersion"])):
        wanted = preconditions.get(field)
        if wanted is not None and wanted != have:
            _, kind, _, name = object_key(current)
            raise Conflict(
                f'Precondition failed for {kind} "{name}": {field} is {have}, not {wanted}'
            )


def _updated(key: Key, current: Object, obj: Object) -> Change | None:
    new = _with_metadata(current)
    meta, cur_meta = new["metadata"], current["metadata"]
    for name in _USER_METADATA:
        if obj["metadata"].get(name):
            meta[name] = obj["metadata"][name]
        else:
            meta.pop(name, None)
    if cur_meta.get("deletionTimestamp"):
        added = set(meta.get("finalizers") or []) - set(cur_meta.get("finalizers") or [])
        if added:
            raise Invalid(
                "no new finalizers can be added while the object is being deleted: "
                f"{sorted(added)}",
                field="metadata.finalizers",
            )
    if "spec" in obj:
        new["spec"] = obj["spec"]
    else:
        new.pop("spec", None)
    for name in [*new, *obj]:  # top-level fields of kinds with no spec (like Event)
        if name not in _ENVELOPE:
            if name in obj:
                new[name] = obj[name]
            else:
                new.pop(name, None)
    if new.get("spec") != current.get("spec"):
        meta["generation"] = int(cur_meta.get("generation", 1)) + 1
    if cur_meta.get("deletionTimestamp") and not meta.get("finalizers"):
        return Change("DELETED", key, new, cur_meta.get("labels"))
    return _change(key, current, new)


def _recorded(write: Write, current: Object, new: Object, now: float) -> Object:
    """`new` (validated) with the fields it changes recorded as the write's manager's, when
    the write records fields (`WriteOptions.record_fields`, or an object already managed)."""
    actor = write.options.actor
    if actor is None or not actor.manager:
        return new
    if not (write.options.record_fields or current["metadata"].get("managedFields")):
        return new
    at = datetime.fromtimestamp(now, UTC)
    return record_update(
        current, new, manager=actor.manager, now=at, schema=apply_schema(write.kind)
    )


def _patched(write: Write, current: Object, now: float) -> Change | None:
    patched = apply_patch(current, write.patch, write.patch_type)
    if not isinstance(patched.get("metadata"), dict):
        raise Invalid("a patch may not remove metadata", field="metadata")
    if object_key(patched) != write.key or patched.get("apiVersion") != current["apiVersion"]:
        raise Invalid("a patch may not change apiVersion, kind, name or namespace", field="patch")
    _check_version(patched, current)
    patched["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    patched.pop("status", None)
    write.kind.validate(patched)
    return _updated(write.key, current, _recorded(write, current, patched, now))


def _admitted(write: Write, current: Object, now: float) -> Change | None:
    """`write.admitted` written over `current`, as an update (or a status write) of it."""
    admitted = write.admitted
    assert admitted is not None
    _check_version(admitted, current)
    if write.op == "update_status":
        return _change(write.key, current, _status_written(write, current, admitted))
    return _updated(write.key, current, _recorded(write, current, admitted, now))


def _status_written(write: Write, current: Object, obj: Object) -> Object:
    """`current` with the status of `obj` (a status write changes nothing else), and with
    `obj`'s managed fields when the write records fields and brings them (a server-side
    apply of the status, `setpoint.store.apply`, brings its manager's new entry)."""
    new = dict(current)  # `current` is the backend's private copy: share what is unchanged
    if obj.get("status") is None:
        new.pop("status", None)
    else:
        new["status"] = obj["status"]
    meta = obj.get("metadata") or {}
    if write.options.record_fields and "managedFields" in meta:
        new = _with_metadata(new)
        if entries := meta["managedFields"]:
            new["metadata"]["managedFields"] = entries
        else:
            new["metadata"].pop("managedFields", None)
    return new


def _deleted(key: Key, current: Object, now: float, propagation: str) -> Change | None:
    """Without finalizers, gone at once; with them, marked (deletionTimestamp) until they go.
    Foreground and Orphan propagation add the finalizer the garbage collector acts on."""
    if propagation not in PROPAGATION_FINALIZERS:
        raise Invalid(
            f"{propagation!r}: want Background, Foreground or Orphan", field="propagationPolicy"
        )
    meta = current["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    extra = PROPAGATION_FINALIZERS[propagation]
    if extra and extra not in finalizers and not meta.get("deletionTimestamp"):
        finalizers.append(extra)
    if not finalizers:
        return Change("DELETED", key, current, meta.get("labels"))
    new = _with_metadata(current)
    new["metadata"]["finalizers"] = finalizers
    if "deletionTimestamp" not in new["metadata"]:
        new["metadata"]["deletionTimestamp"] = rfc3339(now)
        # As Kubernetes: the deletion mark is a change of intent, so generation moves and
        # controllers filtering on generation_changed see it.
        new["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
    return _change(key, current, new)


def _change(key: Key, current: Object, new: Object) -> Change | None:
    if new == current:
        return None
    return Change("MODIFIED", key, new, current["metadata"].get("labels"))
