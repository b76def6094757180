"""Kinds as data: the kinds a store's `CustomResourceDefinition`s define, kept in the registry
of every process that opens the store, and the CRDs Python-registered kinds publish.

* Opening a store (`open_store`, `open_reader`) registers the CRD kind and `learn_kinds`
  from the CRDs stored; while it is open, the registry's `refresh` rereads them, so a
  lookup of a kind another process defined meanwhile finds it before refusing.
* Every committed CRD change the backend sees (this process's writes, and other
  processes' that it publishes to its watchers) goes through `learn_change`: a new or
  changed CRD defines its kind at once, a deleted one forgets it.
* `setpoint.store.read_kinds(url, registry)` is the same for a short-lived reader (the
  CLI, before it names a kind): a synchronous read of the store's CRDs, if there is one.
* `publish_kinds(store, kinds)` writes the CRD of each kind registered in Python that has
  none, or a different one: idempotent, so the engine and the API server call it on start.

A kind registered in Python always wins over a CRD of the same apiVersion and kind (its
models validate more than a schema can). A stored CRD that does not make a kind (written
by an older version) is skipped with a warning, never fatal to opening the store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from setpoint.errors import AlreadyExists, Conflict, Invalid, NotFound
from setpoint.model.crd import CRD, crd_of, kind_of
from setpoint.model.kinds import Kind, Registry
from setpoint.model.meta import Object

if TYPE_CHECKING:
    from setpoint.store.base import Store

log = logging.getLogger("setpoint.store")


def is_crd(api_version: str, kind: str) -> bool:
    return api_version == CRD.api_version and kind == CRD.kind


def learn_kinds(registry: Registry, crds: Iterable[Object]) -> None:
    """Make the registry's kinds defined as data exactly those `crds` define."""
    registry.register(CRD)
    wanted: set[tuple[str, str]] = set()
    for crd in crds:
        if registry.registered(*_names(crd)):
            continue  # a Python kind's own CRD: nothing to learn (and no schema to read)
        kind = _kind(crd)
        if kind is not None and registry.define(kind):
            wanted.add((kind.api_version, kind.kind))
    for kind in registry.defined():
        if (kind.api_version, kind.kind) not in wanted:
            registry.forget(kind.api_version, kind.kind)


def learn_change(registry: Registry, crd: Object, *, deleted: bool) -> None:
    """One CRD written (or, `deleted`, gone): define or forget its kind."""
    if registry.registered(*_names(crd)):
        return
    kind = _kind(crd)
    if kind is None:
        return
    if deleted:
        registry.forget(kind.api_version, kind.kind)
    else:
        for old in registry.defined():  # a changed CRD may have moved its stored version
            if (old.group, old.kind) == (kind.group, kind.kind) and old != kind:
                registry.forget(old.api_version, old.kind)
        registry.define(kind)


def _names(crd: Object) -> tuple[str, str]:
    """The (apiVersion, kind) a CRD defines, or empty names if it says none."""
    spec = crd.get("spec")
    if not isinstance(spec, dict):
        return "", ""
    versions = spec.get("versions")
    stored = (
        [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if isinstance(versions, list)
        else []
    )
    kind = (spec.get("names") or {}).get("kind") if isinstance(spec.get("names"), dict) else None
    if not stored or not isinstance(kind, str):
        return "", ""
    return f"{spec.get('group')}/{stored[0].get('name')}", kind


def _kind(crd: Object) -> Kind | None:
    try:
        return kind_of(crd)
    except Invalid as exc:
        name = (crd.get("metadata") or {}).get("name")
        log.warning("CustomResourceDefinition %s defines no kind: %s", name, exc)
        return None


async def publish_kinds(store: Store, kinds: Iterable[Kind]) -> int:
    """Write the CRD of every kind in `kinds` with a group and models (the core `v1` kinds
    have none) whose stored CRD is missing or says something else; return how many were
    written. Nothing is written for a CRD already as it should be."""
    written = 0
    for kind in kinds:
        if not kind.group or kind.validator is not None:
            continue
        try:
            crd = crd_of(kind)
            CRD.validate(crd)
        except Invalid as exc:  # a kind whose models make no structural schema: served anyway
            log.warning("%s in %s publishes no CRD: %s", kind.kind, kind.api_version, exc)
            continue
        for _ in range(5):
            try:
                current = await store.get(
                    CRD.api_version, CRD.kind, crd["metadata"]["name"], namespace=None
                )
            except NotFound:
                try:
                    await store.create(crd)
                except AlreadyExists:
                    continue
                written += 1
                break
            if current.get("spec") == crd["spec"]:
                break
            updated = {**current, "spec": crd["spec"]}
            try:
                await store.update(updated)
            except Conflict:
                continue
            written += 1
            break
    return written
