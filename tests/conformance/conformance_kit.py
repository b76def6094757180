"""Shared parts of the store conformance suite: the test kinds, manifest builders, watch helpers.

Imported by `conftest.py`, the test modules and the child process of the restart test
(which puts this directory on `sys.path`), so it imports nothing but setpoint and pydantic.
No I/O of its own; helpers that wait do so with `asyncio.wait_for` timeouts, never sleeps.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from typing import Any

from pydantic import Field

from setpoint.model import Kind, Registry, Schema

API = "test.setpoint.dev/v1"
TIMEOUT = 10.0
"""Seconds any single wait may take before the test fails (never spent when all is well)."""


class WidgetSpec(Schema):
    size: int = Field(ge=0)
    color: str = "blue"
    tags: list[str] = []


class WidgetStatus(Schema):
    phase: str | None = None
    ready_replicas: int | None = Field(default=None, ge=0)
    observed_generation: int | None = None


class GadgetSpec(Schema):
    level: int = 0


class TaskRef(Schema):
    kind: str
    name: str
    namespace: str | None = None


class TaskSpec(Schema):
    after: list[TaskRef] = []


WIDGET = Kind(API, "Widget", "widgets", namespaced=True, spec=WidgetSpec, status=WidgetStatus)
GADGET = Kind(API, "Gadget", "gadgets", namespaced=False, spec=GadgetSpec)
NOTE = Kind(API, "Note", "notes", namespaced=True)
"""Schemaless: spec is free-form, for objects of any shape and size."""
TASK = Kind(API, "Task", "tasks", namespaced=True, spec=TaskSpec, depends_on="spec.after")
"""A kind whose `spec.after` entries are dependency edges: the store refuses a cycle."""


def make_registry() -> Registry:
    """A fresh registry holding only the test kinds (never the global one)."""
    registry = Registry()
    for kind in (WIDGET, GADGET, NOTE, TASK):
        registry.register(kind)
    return registry


def widget(
    name: str,
    size: int = 1,
    *,
    namespace: str | None = None,
    labels: dict[str, str] | None = None,
    finalizers: list[str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if labels is not None:
        meta["labels"] = labels
    if finalizers is not None:
        meta["finalizers"] = finalizers
    return {"apiVersion": API, "kind": "Widget", "metadata": meta, "spec": {"size": size, **spec}}


def gadget(name: str, level: int = 0, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": API, "kind": "Gadget", "metadata": meta, "spec": {"level": level}}


def note(name: str, data: Any, *, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API, "kind": "Note", "metadata": meta, "spec": {"data": data}}


def task(name: str, *after: str, namespace: str | None = None) -> dict[str, Any]:
    """A Task that depends on the Tasks named `after` (`kind/name` for another kind)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    refs = [
        {"kind": ref.partition("/")[0], "name": ref.partition("/")[2]}
        if "/" in ref
        else {"kind": "Task", "name": ref}
        for ref in after
    ]
    return {"apiVersion": API, "kind": "Task", "metadata": meta, "spec": {"after": refs}}


def rv(obj: dict[str, Any]) -> int:
    """An object's resourceVersion as the revision number it is."""
    value = obj["metadata"]["resourceVersion"]
    assert isinstance(value, str), f"resourceVersion must be a string, got {value!r}"
    return int(value)


def without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"].pop("resourceVersion", None)
    return out


async def next_event(events: AsyncIterator[Any], seconds: float = TIMEOUT) -> Any:
    """The next event, or fail the test after `seconds`."""
    return await asyncio.wait_for(anext(events), seconds)


async def take(events: AsyncIterator[Any], n: int, seconds: float = TIMEOUT) -> list[Any]:
    """The next `n` events, checking each is consistent with its object."""
    out = []
    for _ in range(n):
        event = await next_event(events, seconds)
        assert event.type in ("ADDED", "MODIFIED", "DELETED"), event
        assert event.revision == rv(event.object), event
        out.append(event)
    return out


async def take_until(
    events: AsyncIterator[Any], revision: int, seconds: float = TIMEOUT
) -> list[Any]:
    """Events up to and including the one at `revision` (which must come)."""
    out = []
    while not out or out[-1].revision < revision:
        out.extend(await take(events, 1, seconds))
    assert out[-1].revision == revision, f"skipped revision {revision}: {out[-1]}"
    return out


async def close_watch(events: AsyncIterator[Any]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        await aclose()


async def first_event(store: Any, *args: Any, **kwargs: Any) -> Any:
    """Start `store.watch(*args, **kwargs)`, return its first event and close it: errors
    raised when the watch is called and when iteration starts both surface here."""
    events = store.watch(*args, **kwargs)
    try:
        return await next_event(events)
    finally:
        await close_watch(events)


async def snapshot(store: Any) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """The store's revision and every object of every test kind: equal before and after a
    refused write means nothing was written."""
    lists: dict[str, list[dict[str, Any]]] = {}
    for kind in ("Widget", "Gadget", "Note", "Task"):
        items, _ = await store.list(API, kind)
        lists[kind] = sorted(
            items, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
        )
    return await store.revision(), lists


def replay(
    events: list[Any], state: dict[tuple[str, str, str], dict[str, Any]] | None = None
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Apply a watch stream to `state` (a `by_key` map, default empty): the live objects after
    those events. Checks that each event makes sense where it comes."""
    state = dict(state or {})
    for event in events:
        meta = event.object["metadata"]
        key = (event.object["kind"], meta.get("namespace", ""), meta["name"])
        if event.type == "ADDED":
            assert key not in state, f"ADDED for an object that exists: {event}"
            state[key] = event.object
        elif event.type == "MODIFIED":
            assert key in state, f"MODIFIED for an object that does not exist: {event}"
            state[key] = event.object
        else:
            assert key in state, f"DELETED for an object that does not exist: {event}"
            del state[key]
    return state


def by_key(items: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in items
    }
