"""Informer and cache: list then watch, indexes, relist after Gone delivering differences."""

from __future__ import annotations

import asyncio
import logging

import pytest
from runtime_support import eventually, widget

from setpoint.model import Registry
from setpoint.runtime.informer import Informer, InformerEvent
from setpoint.store import Store


async def test_cache_follows_the_store(store: Store, registry: Registry) -> None:
    await store.create(widget("a", 1, labels={"tier": "web"}))
    informer = Informer(store, registry.resolve("widgets"))
    seen: list[tuple[str, str]] = []
    informer.add_handler(lambda e: seen.append((e.type, e.object["metadata"]["name"])))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        assert informer.cache.get("a", "default") is not None
        b = await store.create(widget("b", 2, labels={"tier": "db"}))
        b["spec"]["size"] = 3
        await store.update(b)
        await store.delete("test.setpoint.dev/v1", "Widget", "a")

        async def caught_up() -> bool:
            return informer.cache.revision == await store.revision()

        await eventually(caught_up)
        assert informer.cache.get("a", "default") is None
        cached_b = informer.cache.get("b", "default")
        assert cached_b is not None
        assert cached_b["spec"]["size"] == 3
        assert [o["metadata"]["name"] for o in informer.cache.list(label_selector="tier=db")] == [
            "b"
        ]
        assert informer.cache.by_index("label", "tier=db")[0]["metadata"]["name"] == "b"
        assert seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "a")]
    finally:
        task.cancel()


async def test_cache_reads_are_copies(store: Store, registry: Registry) -> None:
    await store.create(widget("a", 1))
    informer = Informer(store, registry.resolve("widgets"))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        obj = informer.cache.get("a", "default")
        assert obj is not None
        obj["spec"]["size"] = 99
        again = informer.cache.get("a", "default")
        assert again is not None
        assert again["spec"]["size"] == 1
    finally:
        task.cancel()


async def test_relist_delivers_differences(store: Store, registry: Registry) -> None:
    """A relist (as after `Gone`) turns what changed meanwhile into ADDED/MODIFIED/DELETED,
    and nothing for what did not change."""
    kind = registry.resolve("widgets")
    await store.create(widget("keep", 1))
    await store.create(widget("same", 1))
    await store.create(widget("drop", 1))
    informer = Informer(store, kind)
    events: list[InformerEvent] = []
    informer.add_handler(events.append)
    await informer._list()
    events.clear()

    keep = await store.get(kind.api_version, kind.kind, "keep")
    keep["spec"]["size"] = 2
    await store.update(keep)
    await store.delete(kind.api_version, kind.kind, "drop")
    await store.create(widget("new", 1))
    await store.compact(await store.revision())

    assert await informer._list() == await store.revision()
    got = sorted((e.type, e.object["metadata"]["name"]) for e in events)
    assert got == [("ADDED", "new"), ("DELETED", "drop"), ("MODIFIED", "keep")]
    assert sorted(name for _, name in informer.cache) == ["keep", "new", "same"]


async def test_watch_gone_relists(
    store: Store, registry: Registry, caplog: pytest.LogCaptureFixture
) -> None:
    """When the watch ends with Gone (the store expired it), the informer relists and
    carries on: later changes still reach the cache."""
    caplog.set_level(logging.INFO, "setpoint.informer")
    kind = registry.resolve("widgets")
    informer = Informer(store, kind)
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        store._watchers.expire()  # type: ignore[attr-defined]  # what a backend does on loss
        await store.create(widget("after", 1))

        async def cached() -> bool:
            return informer.cache.get("after", "default") is not None

        await eventually(cached)
        assert "relisting" in caplog.text
    finally:
        task.cancel()


async def test_user_index(store: Store, registry: Registry) -> None:
    informer = Informer(
        store, registry.resolve("widgets"),
        indexes={"size": lambda o: [str(o["spec"]["size"])]},
    )  # fmt: skip
    await store.create(widget("a", 1))
    await store.create(widget("b", 2))
    await store.create(widget("c", 2))
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 5)
        assert [o["metadata"]["name"] for o in informer.cache.by_index("size", "2")] == ["b", "c"]
    finally:
        task.cancel()
