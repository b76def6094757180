"""Field managers against a store: server-side apply, and plain writes recorded in
`metadata.managedFields`. Each reads the live object, lets `setpoint.model.managed_fields`
decide (`apply`, `update`; the kind's schema says how its lists merge), writes that with
compare-and-swap, and reads again on a lost race.

    obj = await server_side_apply(store, kind, name, namespace, applied,
                                  field_manager="kubectl", force=False)
    obj = await patch_recorded(store, kind, name, namespace, patch, "merge",
                               manager="kubectl-patch", always=True)
    obj = await update_recorded(store, kind, obj, manager="kubectl-edit")

Each takes the `WriteOptions` of its writes (`options`: a dry run decides and writes
nothing; the actor goes with the write). `server_side_apply` is what the HTTP API's
`PATCH` with `application/apply-patch+yaml` does (`kubectl apply --server-side`). A
`Conflict` with `causes` (fields owned by other managers) is the caller's to show; a lost
race (`Conflict` without causes) is retried here. `patch_recorded` and `update_recorded`
are a plain PATCH and PUT that take the fields they change (an `Update` entry), so that a
later apply of another value conflicts instead of silently undoing them. They cost a
read and a second validation, so the API uses them only when recording matters
(`docs/api.md`); a PATCH of an object with no managed fields, not `always`, is the store's
plain `patch`.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound
from setpoint.model import Kind, Object, apply_patch
from setpoint.model.crd import apply_schema
from setpoint.model.managed_fields import apply, update
from setpoint.store.base import NO_OPTIONS, Store, WriteOptions

ATTEMPTS = 10
"""Read-decide-write rounds before a busy object's `Conflict` is given to the caller."""


async def server_side_apply(
    store: Store,
    kind: Kind,
    name: str,
    namespace: str | None,
    applied: Any,
    *,
    field_manager: str,
    force: bool = False,
    options: WriteOptions = NO_OPTIONS,
    now: datetime | None = None,
) -> Object:
    """Apply `applied` (the manager's whole configuration of the object `name` of `kind`)
    and return the object as stored (with a dry run: as it would be, nothing written)."""
    intent = _intent(kind, name, namespace, applied)
    schema = apply_schema(kind)
    for _ in range(ATTEMPTS):
        try:
            live: Object | None = await store.get(kind.api_version, kind.kind, name, namespace)
        except NotFound:
            live = None
        at = now or datetime.now(UTC)
        merged = apply(live, intent, manager=field_manager, force=force, now=at, schema=schema)
        try:
            if live is None:
                return await store.create(merged, options=options)
            return await store.update(merged, options=options)
        except AlreadyExists:
            continue
        except Conflict as exc:
            if exc.causes:
                raise
            continue  # changed meanwhile: apply onto what is there now
    raise _busy(kind, name)


async def patch_recorded(
    store: Store,
    kind: Kind,
    name: str,
    namespace: str | None,
    patch: Any,
    patch_type: str,
    *,
    manager: str,
    always: bool,
    options: WriteOptions = NO_OPTIONS,
    now: datetime | None = None,
) -> Object:
    """Patch the object (`merge` or `json`, as `Store.patch`) and record the fields the
    patch changed as `manager`'s, when the object has managed fields or `always`. Retried
    on a lost race unless the patch names the resourceVersion it expects."""
    for _ in range(ATTEMPTS):
        live = await store.get(kind.api_version, kind.kind, name, namespace)
        if not always and not live["metadata"].get("managedFields"):
            return await store.patch(
                kind.api_version,
                kind.kind,
                name,
                patch,
                namespace,
                patch_type=patch_type,
                options=options,
            )
        patched = apply_patch(live, patch, patch_type)
        meta = patched.get("metadata")
        if not isinstance(meta, dict):
            raise Invalid("a patch may not remove metadata", field="metadata")
        identity = ("apiVersion", "kind")
        if any(patched.get(k) != live.get(k) for k in identity) or any(
            meta.get(k) != live["metadata"].get(k) for k in ("name", "namespace")
        ):
            raise Invalid(
                "a patch may not change apiVersion, kind, name or namespace", field="patch"
            )
        pinned = meta.get("resourceVersion") != live["metadata"]["resourceVersion"]
        try:
            return await store.update(_recorded(kind, live, patched, manager, now), options=options)
        except Conflict:
            if pinned:
                raise
    raise _busy(kind, name)


async def update_recorded(
    store: Store,
    kind: Kind,
    obj: Object,
    *,
    manager: str,
    options: WriteOptions = NO_OPTIONS,
    now: datetime | None = None,
) -> Object:
    """Replace the object (a PUT: `obj` names the resourceVersion it replaces) and record
    the fields it changed as `manager`'s."""
    meta = obj["metadata"]
    live = await store.get(kind.api_version, kind.kind, meta.get("name"), meta.get("namespace"))
    if meta.get("resourceVersion") != live["metadata"]["resourceVersion"]:
        return await store.update(obj, options=options)  # stale (or none): the store says why
    return await store.update(_recorded(kind, live, obj, manager, now), options=options)


def _recorded(kind: Kind, live: Object, new: Object, manager: str, now: datetime | None) -> Object:
    """`new` with `manager`'s `Update` entry, decided on its validated form (defaults
    filled, as it will be stored), so a default is no change."""
    validated = copy.deepcopy(new)
    validated.pop("status", None)
    kind.validate(validated)
    at = now or datetime.now(UTC)
    return update(live, validated, manager=manager, now=at, schema=apply_schema(kind))


def _busy(kind: Kind, name: str) -> Conflict:
    return Conflict(f'{kind.kind} "{name}" kept changing while being written; try again')


def _intent(kind: Kind, name: str, namespace: str | None, applied: Any) -> Object:
    """The applied configuration, checked to be the object addressed."""
    if not isinstance(applied, dict):
        raise Invalid("an applied configuration must be an object")
    intent = copy.deepcopy(applied)
    if intent.get("apiVersion") != kind.api_version or intent.get("kind") != kind.kind:
        raise Invalid(
            f"want apiVersion {kind.api_version} and kind {kind.kind}, as the URL says",
            field="apiVersion",
        )
    meta = intent.setdefault("metadata", {})
    if not isinstance(meta, dict):
        raise Invalid("must be an object", field="metadata")
    if meta.get("name", name) != name:
        raise Invalid(f"{meta.get('name')!r}: the URL names {name!r}", field="metadata.name")
    meta["name"] = name
    if kind.namespaced:
        if meta.get("namespace", namespace) != namespace:
            raise Invalid(
                f"{meta.get('namespace')!r}: the URL names {namespace!r}",
                field="metadata.namespace",
            )
        meta["namespace"] = namespace
    for server_owned in ("managedFields", "resourceVersion", "uid", "creationTimestamp"):
        meta.pop(server_owned, None)
    intent.pop("status", None)
    return intent
