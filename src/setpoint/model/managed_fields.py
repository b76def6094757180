"""Server-side apply: who owns which field of an object (`metadata.managedFields`), and what
an apply by one field manager makes of the live object.

    merged = apply(live, applied, manager="kubectl", force=False, now=now)

`applied` is the manager's whole intent (`kubectl apply --server-side`): every field it
sets (leaves of its maps; a list, or an empty map, is one field, replaced whole) becomes
the manager's (its `Apply` entry, in the FieldsV1 form Kubernetes uses:
`{"f:spec": {"f:replicas": {}}}`). A field the manager applied before and no longer does is
removed from the object, unless another manager owns it too. A field another manager
owns, set to a different value, is a conflict: `Conflict` whose `causes` name each field
and its owner, and nothing changes; with `force`, the field changes hands. Two managers
applying the same value share the field.

`update(live, new, manager=..., now=...)` records a plain write (PUT, PATCH, a
controller's update) as Kubernetes does: the fields it changed become the writer's (its
`Update` entry) and leave their other owners, without conflicts.

What counts as a field: everything but `apiVersion`, `kind`, `status` and `metadata`,
except the labels and annotations in `metadata`. An object with no `managedFields` (written
before any apply) has no owners, so a first apply never conflicts. Pure: no I/O, no clock
(`now` is an argument).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from setpoint.errors import Conflict, Invalid
from setpoint.model.meta import Object

Path = tuple[str, ...]
"""A field: the keys from the object's top down (`("spec", "replicas")`)."""

_NOT_FIELDS = ("apiVersion", "kind", "metadata", "status")
_METADATA_FIELDS = ("labels", "annotations")


def apply(
    live: Object | None, applied: Object, *, manager: str, force: bool, now: datetime
) -> Object:
    """The object after `manager` applied `applied` onto `live` (None: a new object), with
    its managed fields; `Conflict` (with `causes`) if it would change another manager's
    fields and `force` is not set."""
    _check_manager(manager)
    wanted = fields_of(applied)
    entries = _entries(live)
    api_version = str(applied.get("apiVersion") or (live or {}).get("apiVersion") or "")
    conflicts: list[tuple[Path, str, str]] = []
    for entry in entries:
        if entry["manager"] == manager and entry.get("operation") == "Apply":
            continue
        owned = decode(entry.get("fieldsV1") or {})
        for path in wanted:
            for theirs in owned:
                if _within(theirs, path) and _value(live, theirs) != _value(applied, theirs):
                    conflicts.append((theirs, entry["manager"], entry.get("apiVersion", "")))
    if conflicts and not force:
        raise _conflict(conflicts)
    taken = {path for path, _, _ in conflicts}

    merged: Object = copy.deepcopy(live) if live is not None else _skeleton(applied)
    before = next(
        (e for e in entries if e["manager"] == manager and e.get("operation") == "Apply"), None
    )
    others = [e for e in entries if e is not before]
    still_owned = {p for e in others for p in decode(e.get("fieldsV1") or {})} - taken
    for path in sorted(decode((before or {}).get("fieldsV1") or {}) - wanted, reverse=True):
        if not any(_within(path, p) or _within(p, path) for p in still_owned):
            _remove(merged, path)
    for path in sorted(wanted):
        _set(merged, path, copy.deepcopy(_value(applied, path)))

    unchanged = live is not None and _without_entries(merged) == _without_entries(live)
    out_entries: list[dict[str, Any]] = []
    for entry in entries:
        if entry is before:
            continue
        owned = decode(entry.get("fieldsV1") or {})
        left = {p for p in owned if not any(_within(p, t) for t in taken)}
        if left:
            out_entries.append({**entry, "fieldsV1": encode(left)} if left != owned else entry)
    if wanted:
        mine = _entry(manager, "Apply", api_version, now, wanted)
        if before is not None and unchanged and before.get("fieldsV1") == mine["fieldsV1"]:
            mine = before  # a no-op apply writes nothing, not even a new time
        where = entries.index(before) if before is not None else len(out_entries)
        out_entries.insert(min(where, len(out_entries)), mine)
    if out_entries:
        merged["metadata"]["managedFields"] = out_entries
    else:
        merged["metadata"].pop("managedFields", None)
    return merged


def _without_entries(obj: Object) -> Object:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}


def update(live: Object, new: Object, *, manager: str, now: datetime) -> Object:
    """`new` (a plain write of `live`) with managed fields: the fields whose values it
    changed become `manager`'s (its `Update` entry) and no other manager's."""
    _check_manager(manager)
    changed = {p for p in fields_of(new) | fields_of(live) if _value(live, p) != _value(new, p)}
    entries = _entries(live)
    if not changed:
        out = copy.deepcopy(new)
        if entries:
            out["metadata"]["managedFields"] = entries
        return out
    kept: list[dict[str, Any]] = []
    mine: set[Path] = set(changed & fields_of(new))
    for entry in entries:
        owned = decode(entry.get("fieldsV1") or {})
        if entry["manager"] == manager and entry.get("operation") == "Update":
            mine |= {p for p in owned if _value(new, p) is not None}
            continue
        left = {p for p in owned if not any(_within(p, c) or _within(c, p) for c in changed)}
        if left:
            kept.append({**entry, "fieldsV1": encode(left)} if left != owned else entry)
    out = copy.deepcopy(new)
    api_version = str(new.get("apiVersion") or "")
    entries_out = [*kept, _entry(manager, "Update", api_version, now, mine)] if mine else kept
    if entries_out:
        out["metadata"]["managedFields"] = entries_out
    else:
        out["metadata"].pop("managedFields", None)
    return out


# -- field sets ---------------------------------------------------------------------------


def fields_of(obj: Object) -> set[Path]:
    """The fields `obj` sets: the leaves of its maps (a list or an empty map is one)."""
    out: set[Path] = set()
    for name, value in obj.items():
        if name not in _NOT_FIELDS:
            _leaves(value, (name,), out)
    meta = obj.get("metadata") or {}
    for name in _METADATA_FIELDS:
        if isinstance(meta.get(name), dict):
            _leaves(meta[name], ("metadata", name), out)
    return out


def _leaves(value: Any, path: Path, out: set[Path]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _leaves(child, (*path, str(key)), out)
    elif value is not None:
        out.add(path)


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """Fields as FieldsV1: a trie of `f:<name>` keys, `{}` at each field."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def decode(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    """The fields a FieldsV1 trie holds (`"."` marks a map that is itself a field; list
    items, `k:`/`v:`/`i:` keys, stand for their whole list)."""
    out: set[Path] = set()
    if not isinstance(fields, dict):
        raise Invalid("want a FieldsV1 map", field="metadata.managedFields")
    for key, child in fields.items():
        if key == ".":
            out.add(prefix)
        elif key.startswith("f:"):
            path = (*prefix, key[2:])
            inner = decode(child, path) if isinstance(child, dict) and child else set()
            out |= inner or {path}
        elif prefix:
            out.add(prefix)  # an item of a list: the list is the field
    return out


def _within(path: Path, ancestor: Path) -> bool:
    """Whether `path` is `ancestor` or a field under it."""
    return path[: len(ancestor)] == ancestor


# -- values -----------------------------------------------------------------------------


def _value(obj: Object | None, path: Path) -> Any:
    node: Any = obj
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _set(obj: Object, path: Path, value: Any) -> None:
    node = obj
    for part in path[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = node[part] = {}
        node = child
    node[path[-1]] = value


def _remove(obj: Object, path: Path) -> None:
    """Remove the field, then each map above it that it leaves empty (below top level)."""
    parents: list[dict[str, Any]] = [obj]
    for part in path[:-1]:
        child = parents[-1].get(part)
        if not isinstance(child, dict):
            return
        parents.append(child)
    parents[-1].pop(path[-1], None)
    for depth in range(len(path) - 1, 1, -1):
        if parents[depth]:
            break
        parents[depth - 1].pop(path[depth - 1], None)


def _skeleton(applied: Object) -> Object:
    """A new object's identity (apiVersion, kind, name, namespace), before its fields."""
    meta = applied.get("metadata") or {}
    out: Object = {
        "apiVersion": applied.get("apiVersion"),
        "kind": applied.get("kind"),
        "metadata": {k: meta[k] for k in ("name", "namespace", "generateName") if k in meta},
    }
    return out


# -- entries ------------------------------------------------------------------------------


def _check_manager(manager: str) -> None:
    if not isinstance(manager, str) or not manager or len(manager) > 128:
        raise Invalid("required: 1 to 128 characters", field="fieldManager")


def _entries(live: Object | None) -> list[dict[str, Any]]:
    entries = ((live or {}).get("metadata") or {}).get("managedFields") or []
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("manager"), str) for e in entries
    ):
        raise Invalid(
            "want a list of entries, each naming its manager", field="metadata.managedFields"
        )
    return [dict(e) for e in entries]


def _entry(
    manager: str, operation: str, api_version: str, now: datetime, fields: set[Path]
) -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fieldsType": "FieldsV1",
        "fieldsV1": encode(fields),
    }


def field_path(path: Path) -> str:
    """`.spec.replicas`: a field as Kubernetes names it in conflicts."""
    return "".join(f".{part}" for part in path)


def _conflict(conflicts: list[tuple[Path, str, str]]) -> Conflict:
    unique = sorted(set(conflicts))
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f'conflict with "{owner}"' + (f" using {version}" if version else ""),
            "field": field_path(path),
        }
        for path, owner, version in unique
    ]
    lines = "\n".join(f"- {c['message']}: {c['field']}" for c in causes)
    count = len(causes)
    return Conflict(
        f"Apply failed with {count} conflict{'s' if count > 1 else ''}:\n{lines}\n"
        "Apply again with --force-conflicts to take these fields, or leave them out of "
        "the applied configuration.",
        causes=causes,
    )
