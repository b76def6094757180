"""Server-side apply against a store: it reads the live object, lets
`setpoint.model.managed_fields.apply` decide (the kind's schema says how its lists merge),
writes that with compare-and-swap, and reads again on a lost race.

    obj = await server_side_apply(store, kind, name, namespace, applied,
                                  field_manager="kubectl", force=False)

(A plain PUT or PATCH that records the fields it changes, so that a later apply of another
value conflicts instead of silently undoing them, is the store's own `update` or `patch`
with `WriteOptions.record_fields`: `setpoint.store.rules` records them in the write, on the
object as validated once.)

An apply of the status subresource (`subresource="status"`) sets the status only, as a
status write that carries the manager's entry (`rules` keeps a status write's managed
fields when it records fields).

It takes the `WriteOptions` of its writes (`options`: a dry run decides and writes
nothing; the actor goes with the write). It is what the HTTP API's `PATCH` with
`application/apply-patch+yaml` does (`kubectl apply --server-side`). A `Conflict` with
`causes` (fields owned by other managers) is the caller's to show; a lost race (`Conflict`
without causes) is retried here.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound
from setpoint.model import Kind, Object
from setpoint.model.crd import apply_schema
from setpoint.model.managed_fields import apply
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
    subresource: str | None = None,
) -> Object:
    """Apply `applied` (the manager's whole configuration of the object `name` of `kind`)
    and return the object as stored (with a dry run: as it would be, nothing written).
    `subresource="status"`: the configuration of its status, written as a status write
    (with the manager's entry in `managedFields`) to an object that exists."""
    status = subresource == "status"
    intent = _intent(kind, name, namespace, applied, keep_status=status)
    schema = apply_schema(kind)
    for _ in range(ATTEMPTS):
        try:
            live: Object | None = await store.get(kind.api_version, kind.kind, name, namespace)
        except NotFound:
            if status:
                raise
            live = None
        at = now or datetime.now(UTC)
        merged = apply(
            live,
            intent,
            manager=field_manager,
            force=force,
            now=at,
            schema=schema,
            subresource=subresource,
        )
        try:
            if live is None:
                return await store.create(merged, options=options)
            if status:
                recorded = dataclasses.replace(options, record_fields=True)
                return await store.update_status(merged, options=recorded)
            return await store.update(merged, options=options)
        except AlreadyExists:
            continue
        except Conflict as exc:
            if exc.causes:
                raise
            continue  # changed meanwhile: apply onto what is there now
    raise _busy(kind, name)


def _busy(kind: Kind, name: str) -> Conflict:
    return Conflict(f'{kind.kind} "{name}" kept changing while being written; try again')


def _intent(
    kind: Kind, name: str, namespace: str | None, applied: Any, *, keep_status: bool = False
) -> Object:
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
    if not keep_status:
        intent.pop("status", None)
    return intent
