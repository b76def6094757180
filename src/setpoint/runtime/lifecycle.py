"""Object lifecycle helpers: owner references, finalizers and deletion state.

Pure functions on objects in wire form (plain dicts), for controllers to use before
they write: `set_controller_reference(owner, child)` makes `owner` the controller of
`child` (so the garbage collector deletes `child` with it); `add_finalizer` and
`remove_finalizer` hold an object back from deletion while a controller cleans up;
`is_deleting` says that deletion has begun. Functions that change an object change it
in place and return whether they changed anything, so a caller writes only when there
is something to write. No I/O, no clock.
"""

from __future__ import annotations

from typing import Any

from setpoint.errors import Invalid
from setpoint.model import Object

__all__ = [
    "add_finalizer",
    "controller_of",
    "has_finalizer",
    "is_deleting",
    "owner_reference",
    "remove_finalizer",
    "set_controller_reference",
]


def owner_reference(
    owner: Object, *, controller: bool = True, block_owner_deletion: bool = True
) -> dict[str, Any]:
    """The ownerReferences entry that names `owner` (which must have been created: it needs
    its uid). With `block_owner_deletion`, a foreground deletion of `owner` waits for the
    object holding this reference to be gone."""
    meta = owner.get("metadata") or {}
    for field in ("apiVersion", "kind"):
        if not owner.get(field):
            raise Invalid("the owner has none", field=field)
    if not meta.get("name"):
        raise Invalid("the owner has none", field="metadata.name")
    if not meta.get("uid"):
        raise Invalid(
            "the owner has no uid: create it (or read it back from the store) first",
            field="metadata.uid",
        )
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": controller,
        "blockOwnerDeletion": block_owner_deletion,
    }


def controller_of(obj: Object) -> dict[str, Any] | None:
    """The ownerReferences entry with `controller: true`, if any."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return dict(ref)
    return None


def set_controller_reference(owner: Object, obj: Object) -> bool:
    """Make `owner` the controller of `obj`: add (or refresh) its owner reference, with
    `controller` and `blockOwnerDeletion` true. Return whether `obj` changed.

    An owner is the same one if its API group, kind and name match (as in
    controller-runtime), so a reference to a recreated owner is refreshed with its new
    uid. Refused with `Invalid` when `obj` already has a different controller, or when
    `owner` is namespaced and `obj` is not in its namespace (owner references never
    cross namespaces; a namespaced object may have a cluster-scoped owner).
    """
    ref = owner_reference(owner, controller=True, block_owner_deletion=True)
    owner_ns = owner["metadata"].get("namespace") or None
    meta = obj.setdefault("metadata", {})
    obj_ns = meta.get("namespace") or None
    if owner_ns is not None and obj_ns != owner_ns:
        where = f'namespace "{obj_ns}"' if obj_ns else "no namespace"
        raise Invalid(
            f'{owner["kind"]} "{ref["name"]}" is in namespace "{owner_ns}" and this object '
            f"has {where}: owner references cannot cross namespaces (set metadata.namespace "
            f'to "{owner_ns}")',
            field="metadata.namespace",
        )
    current = controller_of(obj)
    if current is not None and not _same_object(current, ref):
        raise Invalid(
            f'already controlled by {current.get("kind")} "{current.get("name")}"; an object '
            "has at most one controller (remove that reference first)",
            field="metadata.ownerReferences",
        )
    refs: list[dict[str, Any]] = list(meta.get("ownerReferences") or [])
    for i, existing in enumerate(refs):
        if _same_object(existing, ref):
            if existing == ref:
                return False
            refs[i] = ref
            break
    else:
        refs.append(ref)
    meta["ownerReferences"] = refs
    return True


def _same_object(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same group, kind and name (the version may differ)."""

    def group(ref: dict[str, Any]) -> str:
        return str(ref.get("apiVersion", "")).rpartition("/")[0]

    return (group(a), a.get("kind"), a.get("name")) == (group(b), b.get("kind"), b.get("name"))


def has_finalizer(obj: Object, name: str) -> bool:
    return name in (obj.get("metadata", {}).get("finalizers") or ())


def add_finalizer(obj: Object, name: str) -> bool:
    """Append finalizer `name` unless it is there; return whether `obj` changed.

    The store refuses a new finalizer on an object that is already being deleted."""
    if has_finalizer(obj, name):
        return False
    meta = obj.setdefault("metadata", {})
    meta["finalizers"] = [*(meta.get("finalizers") or []), name]
    return True


def remove_finalizer(obj: Object, name: str) -> bool:
    """Remove finalizer `name` (every occurrence); return whether `obj` changed.

    An object being deleted disappears when an update removes its last finalizer."""
    if not has_finalizer(obj, name):
        return False
    meta = obj["metadata"]
    remaining = [f for f in meta["finalizers"] if f != name]
    if remaining:
        meta["finalizers"] = remaining
    else:
        del meta["finalizers"]
    return True


def is_deleting(obj: Object) -> bool:
    """Whether deletion has begun (`metadata.deletionTimestamp` is set): the object stays
    until its finalizers are gone, and no finalizer can be added."""
    return bool(obj.get("metadata", {}).get("deletionTimestamp"))
