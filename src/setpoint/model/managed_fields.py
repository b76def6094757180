"""Server-side apply: who owns which field of an object (`metadata.managedFields`), and what
an apply by one field manager, or a plain write, makes of the live object.

    merged = apply(live, applied, manager="kubectl", force=False, now=now, schema=schema)

`applied` is the manager's whole intent (`kubectl apply --server-side`): every field it
sets becomes the manager's (its `Apply` entry, in the FieldsV1 form Kubernetes uses:
`{"f:spec": {"f:replicas": {}}}`). A field is a leaf of the object's maps, an empty map
(applied, it owns that the map is there, not what others put in it), or a list, by the
list's type in `schema` (the kind's `openAPIV3Schema`) as Kubernetes reads it:

* `x-kubernetes-list-type: map` with `x-kubernetes-list-map-keys: [name]`: each element
  is its own field, named by its keys (`k:{"name":"web"}`), and so are the fields inside
  it; two managers can own different elements, or different fields of one element;
* `set`: each (scalar) element is its own field (`v:8080`);
* `atomic`, or no type, or no schema at all: the list is one field, replaced whole.

A field the manager applied before and no longer does is removed from the object, unless
another manager owns it too (an element stays while anyone owns a field inside it). A
field another manager owns, set to a different value, is a conflict: `Conflict` whose
`causes` name each field (`.spec.env[name="A"].value`) and its owner, and nothing
changes; with `force`, the field changes hands. Two managers applying the same value
share the field; an element's own entry (`"."`) never conflicts, only what is in it.

`update(live, new, manager=..., now=..., schema=...)` records a plain write (PUT, PATCH)
as Kubernetes does: the fields it changed become the writer's (its `Update` entry) and
leave their other owners, without conflicts. A write that brings its own
`managedFields`, other than the live ones, sets them as given (`[{}]` clears them).

What counts as a field: everything but `apiVersion`, `kind`, `status` and `metadata`,
except the labels and annotations in `metadata`. An apply of the status subresource
(`subresource="status"`) is the other way round: only the fields of `status` count, in an
entry of its own (`"subresource": "status"`), and nothing else of the object changes. An
object with no `managedFields` (written before any apply) has no owners, so a first apply
never conflicts. Pure: no I/O, no clock (`now` is an argument).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from setpoint.errors import Conflict, Invalid
from setpoint.model.meta import Object

Path = tuple[str, ...]
"""A field: its FieldsV1 keys from the object's top down: `("f:spec", "f:replicas")`, or
with a list element, `("f:spec", "f:env", 'k:{"name":"A"}', "f:value")`."""

Schema = Mapping[str, Any]
"""A structural OpenAPI v3 schema (a kind's `openAPIV3Schema`, or a node of one)."""

_NOT_FIELDS = ("apiVersion", "kind", "metadata", "status")
_METADATA_FIELDS = ("labels", "annotations")
_RESET: list[dict[str, Any]] = [{}]
"""`managedFields: [{}]` in a write: forget every owner (as Kubernetes)."""


def apply(
    live: Object | None,
    applied: Object,
    *,
    manager: str,
    force: bool,
    now: datetime,
    schema: Schema | None = None,
    subresource: str | None = None,
) -> Object:
    """The object after `manager` applied `applied` onto `live` (None: a new object), with
    its managed fields; `Conflict` (with `causes`) if it would change another manager's
    fields and `force` is not set; `Invalid` naming the list when an element of a keyed
    list lacks its keys or repeats another's. `subresource="status"`: `applied`'s status
    only, onto `live` (which must exist)."""
    _check_manager(manager)
    if subresource == "status":
        wanted = _status_fields(applied, schema)
    else:
        wanted = fields_of(applied, schema, strict=True)
    entries = _entries(live)
    api_version = str(applied.get("apiVersion") or (live or {}).get("apiVersion") or "")
    conflicts: list[tuple[Path, str, str]] = []

    def is_mine(entry: dict[str, Any]) -> bool:
        return (
            entry["manager"] == manager
            and entry.get("operation") == "Apply"
            and entry.get("subresource") == subresource
        )

    for entry in entries:
        if is_mine(entry):
            continue
        owned = decode(entry.get("fieldsV1") or {})
        for path in wanted:
            for theirs in owned:
                if _covers(applied, path, theirs) and _differs(live, applied, theirs):
                    conflicts.append((theirs, entry["manager"], entry.get("apiVersion", "")))
    if conflicts and not force:
        raise _conflict(conflicts)
    taken = {path for path, _, _ in conflicts}

    merged: Object = copy.deepcopy(live) if live is not None else _skeleton(applied)
    before = next((e for e in entries if is_mine(e)), None)
    others = [e for e in entries if e is not before]
    still_owned = {p for e in others for p in decode(e.get("fieldsV1") or {})} - taken
    for path in sorted(decode((before or {}).get("fieldsV1") or {}) - wanted, reverse=True):
        if not any(_holds(merged, p, path) for p in still_owned):
            _remove(merged, path)
    for path in sorted(wanted):
        _set(merged, path, _value(applied, path))

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
        mine = _entry(manager, "Apply", api_version, now, wanted, subresource)
        if before is not None and unchanged and before.get("fieldsV1") == mine["fieldsV1"]:
            mine = before  # a no-op apply writes nothing, not even a new time
        where = entries.index(before) if before is not None else len(out_entries)
        out_entries.insert(min(where, len(out_entries)), mine)
    _set_entries(merged, out_entries)
    return merged


def update(
    live: Object, new: Object, *, manager: str, now: datetime, schema: Schema | None = None
) -> Object:
    """`new` (a plain write of `live`) with managed fields: the fields whose values it
    changed become `manager`'s (its `Update` entry) and no other manager's. `managedFields`
    that `new` sets, other than the live ones, are kept as given (`[{}]`: none)."""
    _check_manager(manager)
    requested = (new.get("metadata") or {}).get("managedFields")
    entries = _entries(live)
    if requested == _RESET:
        out = copy.deepcopy(new)
        out["metadata"].pop("managedFields", None)
        return out
    if requested and requested != entries:
        _entries(new)  # the writer's own entries: checked, then kept as they are
        return copy.deepcopy(new)
    new_fields, live_fields = fields_of(new, schema), fields_of(live, schema)
    changed = {p for p in new_fields | live_fields if _differs(live, new, p)}
    out = copy.deepcopy(new)
    if not changed:
        _set_entries(out, entries)
        return out
    kept: list[dict[str, Any]] = []
    mine: set[Path] = changed & new_fields
    for entry in entries:
        owned = decode(entry.get("fieldsV1") or {})
        if entry["manager"] == manager and entry.get("operation") == "Update":
            mine |= owned & new_fields
            continue
        left = {p for p in owned if not any(_holds(live, p, c) for c in changed)}
        if left:
            kept.append({**entry, "fieldsV1": encode(left)} if left != owned else entry)
    api_version = str(new.get("apiVersion") or "")
    _set_entries(out, [*kept, _entry(manager, "Update", api_version, now, mine)] if mine else kept)
    return out


def manager_of(field_manager: str | None, user_agent: str | None) -> str:
    """The manager a plain write is recorded under, as kube-apiserver names it: the
    request's `fieldManager`, else its User-Agent up to the first `/` (printable
    characters, at most 128 bytes): `kubectl` for `kubectl/v1.31.0 (linux/amd64)`;
    `unknown` for a request with neither."""
    if field_manager:
        return field_manager
    out = ""
    for char in (user_agent or "").split("/")[0]:
        if not char.isprintable():
            continue
        if len((out + char).encode()) > 128:
            break
        out += char
    return out or "unknown"


def _without_entries(obj: Object) -> Object:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "managedFields"}}


# -- field sets ---------------------------------------------------------------------------


def fields_of(obj: Object, schema: Schema | None = None, *, strict: bool = False) -> set[Path]:
    """The fields `obj` sets (see the module docstring; `schema` says how lists merge).
    `strict`: an element of a keyed list without its keys, or with another's, is `Invalid`
    (an applied configuration); otherwise such a list counts as one field."""
    out: set[Path] = set()
    properties = (schema or {}).get("properties") or {}
    for name, value in obj.items():
        if name not in _NOT_FIELDS:
            _leaves(value, (f"f:{name}",), properties.get(name), out, strict)
    meta = obj.get("metadata") or {}
    for name in _METADATA_FIELDS:
        if isinstance(meta.get(name), dict):
            _leaves(meta[name], ("f:metadata", f"f:{name}"), None, out, strict)
    return out


def _status_fields(obj: Object, schema: Schema | None) -> set[Path]:
    """The fields of `obj`'s status (what an apply of the status subresource sets)."""
    out: set[Path] = set()
    status_schema = ((schema or {}).get("properties") or {}).get("status")
    _leaves(obj.get("status"), ("f:status",), status_schema, out, True)
    return out


def _leaves(value: Any, path: Path, schema: Schema | None, out: set[Path], strict: bool) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _leaves(child, (*path, f"f:{key}"), _child_schema(schema, str(key)), out, strict)
        return
    if isinstance(value, list) and value:
        items = _items(value, path, schema, strict)
        if items is not None:
            element_schema = (schema or {}).get("items")
            for item, element in items:
                out.add((*path, item))
                if isinstance(element, dict):
                    for key, child in element.items():
                        child_schema = _child_schema(element_schema, str(key))
                        _leaves(child, (*path, item, f"f:{key}"), child_schema, out, strict)
            return
    if value is not None:
        out.add(path)


def _child_schema(schema: Schema | None, key: str) -> Schema | None:
    if not schema:
        return None
    found = (schema.get("properties") or {}).get(key)
    if found is None and isinstance(schema.get("additionalProperties"), Mapping):
        found = schema["additionalProperties"]
    return found if isinstance(found, Mapping) else None


def _items(
    value: list[Any], path: Path, schema: Schema | None, strict: bool
) -> list[tuple[str, Any]] | None:
    """The elements of a keyed list (`map` or `set`) with their FieldsV1 keys, or None for
    an atomic list (or one whose elements cannot be told apart, unless `strict`)."""
    list_type = (schema or {}).get("x-kubernetes-list-type")
    keys = (schema or {}).get("x-kubernetes-list-map-keys") or []
    out: list[tuple[str, Any]] = []
    seen: set[str] = set()
    for index, element in enumerate(value):
        if list_type == "set" and not isinstance(element, (dict, list)):
            item = "v:" + _json(element)
        elif list_type == "map" and keys and isinstance(element, dict):
            missing = [k for k in keys if element.get(k) is None]
            if missing:
                if strict:
                    raise Invalid(f"[{index}]: want its key {missing[0]!r}", field=_dotted(path))
                return None
            item = "k:" + _json({k: element[k] for k in keys})
        else:
            return None
        if item in seen:
            if strict:
                raise Invalid(
                    f"[{index}]: {field_path((item,))} is given twice", field=_dotted(path)
                )
            return None
        seen.add(item)
        out.append((item, element))
    return out


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def encode(paths: Iterable[Path]) -> dict[str, Any]:
    """Fields as FieldsV1: a trie of their keys, `{}` at each field, and `"."` on a field
    that has fields inside it (a list element)."""
    root: dict[str, Any] = {}
    ends: set[int] = set()
    for path in sorted(paths):
        node = root
        for part in path:
            if id(node) in ends and "." not in node:
                node["."] = {}
            node = node.setdefault(part, {})
        if node:
            node.setdefault(".", {})
        ends.add(id(node))
    return root


def decode(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    """The fields a FieldsV1 trie holds (`"."` marks a node that is itself a field; an
    `i:` index item stands for its whole list)."""
    out: set[Path] = set()
    if not isinstance(fields, dict):
        raise Invalid("want a FieldsV1 map", field="metadata.managedFields")
    for key, child in fields.items():
        if key == ".":
            out.add(prefix)
        elif key.startswith(("f:", "k:", "v:")):
            path = (*prefix, key)
            inner = decode(child, path) if isinstance(child, dict) and child else set()
            out |= inner or {path}
        elif prefix:
            out.add(prefix)  # an `i:` item: the list is the field
    return out


def _within(path: Path, ancestor: Path) -> bool:
    """Whether `path` is `ancestor` or a field under it."""
    return path[: len(ancestor)] == ancestor


def _covers(obj: Object, field: Path, other: Path) -> bool:
    """Whether setting `field` (to its value in `obj`) sets `other`: the same field, or
    one inside it unless `field` is a container (which sets only that it is there)."""
    return other == field or (_within(other, field) and not _is_container(obj, field))


def _holds(obj: Object | None, owned: Path, path: Path) -> bool:
    """Whether owning `owned` keeps `path` (or ties it to a change of `path`), in `obj`:
    the same field, one inside it, or an atomic one (a whole list, a value) around it. A
    container's own field (a list element, a map) holds only itself, not what is in it."""
    return _within(owned, path) or (_within(path, owned) and not _is_container(obj, owned))


def _is_container(obj: Object | None, path: Path) -> bool:
    """Whether the field `path` is a list element or a map (an empty one, when applied):
    owning it is owning that it is there, each field inside it being a field of its own."""
    return _is_item(path[-1]) or isinstance(_value(obj, path), dict)


def _is_item(part: str) -> bool:
    return part.startswith(("k:", "v:"))


# -- values -----------------------------------------------------------------------------


def _differs(a: Object | None, b: Object | None, path: Path) -> bool:
    """Whether the field `path` differs between `a` and `b` (for a container, a list
    element or a map: whether it is in one and not the other; what is inside it are
    fields of their own)."""
    a_value, b_value = _value(a, path), _value(b, path)
    if _is_item(path[-1]) or (isinstance(a_value, dict) and isinstance(b_value, dict)):
        return (a_value is None) != (b_value is None)
    return bool(a_value != b_value)


def _step(node: Any, part: str) -> Any:
    """The child `part` (a FieldsV1 key) of `node`, or None."""
    if part.startswith("f:"):
        return node.get(part[2:]) if isinstance(node, dict) else None
    if isinstance(node, list):
        for index in _matching(node, part):
            return node[index]
    return None


def _matching(elements: list[Any], part: str) -> list[int]:
    """Indexes of the list elements that the item key `part` names."""
    wanted = json.loads(part[2:])
    if part.startswith("v:"):
        return [i for i, e in enumerate(elements) if e == wanted and not isinstance(e, dict)]
    return [
        i
        for i, e in enumerate(elements)
        if isinstance(e, dict) and all(e.get(k) == v for k, v in wanted.items())
    ]


def _value(obj: Object | None, path: Path) -> Any:
    node: Any = obj
    for part in path:
        node = _step(node, part)
        if node is None:
            return None
    return node


def _set(obj: Object, path: Path, value: Any) -> None:
    """Set the field `path` to `value`; a container's own field (a list element, `k:` or
    `v:`, or an empty map) only makes sure it is there (an element with its keys), the
    fields inside it being set one by one."""
    node: Any = obj
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        if part.startswith("f:"):
            if last:
                if not (value == {} and isinstance(node.get(part[2:]), dict)):
                    node[part[2:]] = copy.deepcopy(value)  # an empty map: there, as it is
                return
            child = node.get(part[2:])
            wants_list = _is_item(path[depth + 1])
            if not isinstance(child, list if wants_list else dict):
                child = node[part[2:]] = [] if wants_list else {}
            node = child
            continue
        found = _step(node, part)
        if found is None:
            found = json.loads(part[2:])
            node.append(found)
        node = found


def _remove(obj: Object, path: Path) -> None:
    """Remove the field (a list element: the element), then each map or list above it
    that it leaves empty (below top level). The key fields of an element stay while the
    element does."""
    containers: list[Any] = [obj]
    for part in path[:-1]:
        child = _step(containers[-1], part)
        if not isinstance(child, (dict, list)):
            return
        containers.append(child)
    last = path[-1]
    element_key = path[-2] if len(path) > 1 and path[-2].startswith("k:") else None
    if element_key and last.startswith("f:") and last[2:] in json.loads(element_key[2:]):
        return
    _drop(containers[-1], last)
    for depth in range(len(path) - 1, 1, -1):
        if containers[depth]:
            break
        _drop(containers[depth - 1], path[depth - 1])


def _drop(container: Any, part: str) -> None:
    if part.startswith("f:"):
        if isinstance(container, dict):
            container.pop(part[2:], None)
    elif isinstance(container, list):
        for index in reversed(_matching(container, part)):
            del container[index]


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


def _set_entries(obj: Object, entries: list[dict[str, Any]]) -> None:
    if entries:
        obj["metadata"]["managedFields"] = entries
    else:
        obj["metadata"].pop("managedFields", None)


def _entry(
    manager: str,
    operation: str,
    api_version: str,
    now: datetime,
    fields: set[Path],
    subresource: str | None = None,
) -> dict[str, Any]:
    entry = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "fieldsType": "FieldsV1",
        "fieldsV1": encode(fields),
    }
    if subresource is not None:
        entry["subresource"] = subresource
    return entry


def check_entries(obj: Object) -> None:
    """`Invalid` unless `obj`'s `metadata.managedFields` (if any) is a list of entries,
    each naming its manager."""
    _entries(obj)


def field_path(path: Path) -> str:
    """A field as Kubernetes names it in conflicts: `.spec.replicas`,
    `.spec.env[name="A"].value`, `.spec.ports[=8080]`."""
    out = []
    for part in path:
        if part.startswith("f:"):
            out.append(f".{part[2:]}")
        elif part.startswith("k:"):
            keys = json.loads(part[2:])
            out.append("[" + ",".join(f"{k}={_json(v)}" for k, v in keys.items()) + "]")
        else:
            out.append(f"[={part[2:]}]")
    return "".join(out)


def _dotted(path: Path) -> str:
    """`spec.dependsOn`: a field as `Invalid` names it."""
    return field_path(path).lstrip(".")


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
